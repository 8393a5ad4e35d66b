#!/usr/bin/env python3
"""CPU test of bench/peers.py's shapes, without PyTorch or a GPU:

- the generated shapes, gemma2_flat included (gemma2's N, D, V on flat random
  data) and gemma2_softcap (gemma2's inputs with Gemma-2's softcap, 30), and
  the command that writes their inputs (save_command): --data random
  for gemma2_flat, realistic for the others; that command, with its N, D, V
  made tiny, is run with the real stage 01 executable, which writes the inputs
  before it looks for a GPU, and the files it writes are checked to be flat
  random data (E ~ N(0,1)) or not;
- the trained-model shapes, lm128k's snapshots lm128k_s0 ... lm128k_s300
  included: run by default when their files are in --lm-data, and the
  lm_data.py command named for a missing one (--only lm128k for a snapshot);
- that peers.py, cce_bench (its --help) and lm_data.py name the same shapes,
  with the same N, D, V, data and seed, and the same lm_data.py dataset.

Standard library only (the .npy files are read by peers.py's own reader).

    python3 tests/bench/test_peers.py [PATH/TO/stage01_materialized [PATH/TO/cce_bench]]

Without the executables, the tests that run them fail (ctest passes both).
"""

import array
import math
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import lm_data  # noqa: E402  (imports neither torch nor numpy at import time)
import peers  # noqa: E402  (imports torch only in main())

STAGE01 = None  # set from the command line
BENCH = None

GENERATED = ["small", "gpt2", "llama3", "gemma2", "gemma2_flat", "gemma2_softcap"]
SNAPSHOTS = ["lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300"]


def flag_values(command):
    """{flag: value or True} of a command line, and its program."""
    words = shlex.split(command)
    flags, k = {}, 1
    while k < len(words):
        word = words[k]
        if k + 1 < len(words) and not words[k + 1].startswith("--"):
            flags[word] = words[k + 1]
            k += 2
        else:
            flags[word] = True
            k += 1
    return words[0], flags


def touch_lm_shape(root, name):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    for f in ("e.npy", "c.npy", "targets.npy"):
        open(os.path.join(folder, f), "wb").close()


def read_floats(path):
    descr, shape, data = peers.load_npy_bytes(path)
    if descr != "<f4":
        raise AssertionError("%s: %s, not float32" % (path, descr))
    return shape, array.array("f", bytes(data))


class GeneratedShapes(unittest.TestCase):
    def test_gemma2_flat_is_gemma2_on_random_data(self):
        self.assertEqual(list(peers.SHAPES), GENERATED)
        self.assertEqual(peers.SHAPES["gemma2_flat"], peers.SHAPES["gemma2"])
        self.assertEqual(peers.data_mode("gemma2_flat"), "random")
        for shape in ("small", "gpt2", "llama3", "gemma2", "gemma2_softcap"):
            self.assertEqual(peers.data_mode(shape), "realistic")

    def test_gemma2_softcap_is_gemma2s_inputs_with_gemma2s_softcap(self):
        self.assertEqual(peers.SHAPES["gemma2_softcap"], peers.SHAPES["gemma2"])
        self.assertEqual(peers.softcap_of("gemma2_softcap"), 30.0)
        for shape in GENERATED[:-1]:
            self.assertIsNone(peers.softcap_of(shape))
        args = peers.make_parser().parse_args(["--inputs", "/in"])
        self.assertEqual(peers.input_folder(args, "gemma2_softcap"), os.path.join("/in", "gemma2"))
        self.assertEqual(peers.save_command("/in", "gemma2_softcap"), peers.save_command("/in", "gemma2"))
        with tempfile.TemporaryDirectory() as empty:
            missing = dict(peers.missing_inputs(empty, ["gemma2_softcap"]))
        self.assertIn(os.path.join(empty, "gemma2") + " lacks", missing["gemma2_softcap"])

    def test_save_command(self):
        for shape in GENERATED:
            with self.subTest(shape=shape):
                program, flags = flag_values(peers.save_command("/tmp/in", shape))
                self.assertEqual(program, "build/stages/stage01_materialized")
                n, d, v = peers.SHAPES[shape]
                self.assertEqual((flags["--n"], flags["--d"], flags["--v"]), (str(n), str(d), str(v)))
                self.assertEqual(flags["--data"], "random" if shape == "gemma2_flat" else "realistic")
                self.assertEqual(flags["--dtype"], "bf16")
                self.assertEqual(flags["--seed"], "1234")  # cce_bench's kSeed, the same for every shape
                self.assertEqual(flags["--save"], os.path.join("/tmp/in", peers.SHAPE_INPUTS.get(shape, shape)))
                self.assertIs(flags["--save-large"], True)  # gemma2's c.npy alone is 2.4 GB
                self.assertEqual(flags["--iters"], "0")

    def test_missing_inputs_name_the_random_command(self):
        with tempfile.TemporaryDirectory() as empty:
            missing = dict(peers.missing_inputs(empty, ["gemma2", "gemma2_flat"]))
        self.assertEqual(sorted(missing), ["gemma2", "gemma2_flat"])
        self.assertIn(peers.save_command(empty, "gemma2_flat"), missing["gemma2_flat"])
        self.assertIn("--data random", missing["gemma2_flat"])
        self.assertIn("--data realistic", missing["gemma2"])

    def test_save_command_runs_and_writes_flat_data(self):
        """The command, with N, D, V made tiny, run with the real stage 01: its flags parse, and --data random
        writes flat data (E ~ N(0,1) everywhere) where realistic does not (E_i[0] = 8 carries the prior)."""
        if STAGE01 is None:
            self.fail("needs the path of stage01_materialized (ctest passes it)")
        first_column = {}
        with tempfile.TemporaryDirectory() as tmp:
            for shape in ("gemma2", "gemma2_flat"):
                words = shlex.split(peers.save_command(tmp, shape))
                words[0] = STAGE01
                for flag, value in (("--n", "64"), ("--d", "16"), ("--v", "300")):
                    words[words.index(flag) + 1] = value
                proc = subprocess.run(words, capture_output=True, text=True, timeout=120)
                # 77: no GPU, the inputs are written first; 0 on a machine with one.
                self.assertIn(proc.returncode, (0, 77), proc.stdout + proc.stderr)
                (n, d), e = read_floats(os.path.join(tmp, shape, "e.npy"))
                self.assertEqual((n, d), (64, 16))
                first_column[shape] = [e[i * d] for i in range(n)]
                if shape == "gemma2_flat":
                    mean = sum(e) / len(e)
                    std = math.sqrt(sum((x - mean) ** 2 for x in e) / len(e))
                    self.assertLess(abs(mean), 0.2)
                    self.assertTrue(0.8 < std < 1.2, std)
        self.assertTrue(all(x == 8.0 for x in first_column["gemma2"]), first_column["gemma2"][:4])
        self.assertFalse(all(x == 8.0 for x in first_column["gemma2_flat"]))

    def test_context_says_random_data(self):
        args = peers.make_parser().parse_args(["--lm-data", "/x"])
        self.assertEqual(peers.shape_context(args, "gemma2_flat", (8192, 2304, 256000)),
                         "gemma2_flat N=8192 D=2304 V=256000 (random data)")
        self.assertEqual(peers.shape_context(args, "gemma2", (8192, 2304, 256000)), "gemma2 N=8192 D=2304 V=256000")
        self.assertEqual(peers.shape_context(args, "gemma2_softcap", (8192, 2304, 256000)),
                         "gemma2_softcap N=8192 D=2304 V=256000 (softcap 30)")
        self.assertEqual(peers.shape_context(args, "lm128k_s30", (8, 4, 10)), "lm128k_s30 N=8 D=4 V=10 (/x/lm128k_s30)")


class TrainedModelShapes(unittest.TestCase):
    def test_snapshots_by_default_when_their_files_are_there(self):
        with tempfile.TemporaryDirectory() as lm:
            self.assertEqual(peers.default_shapes(lm), GENERATED)
            for name in ("lm128k_s100", "lm128k", "lm128k_s0"):
                touch_lm_shape(lm, name)
            self.assertEqual(peers.default_shapes(lm), GENERATED + ["lm128k", "lm128k_s0", "lm128k_s100"])
            args = peers.make_parser().parse_args(["--lm-data", lm, "--inputs", "/in"])
            self.assertEqual(peers.input_folder(args, "lm128k_s100"), os.path.join(lm, "lm128k_s100"))
            self.assertEqual(peers.input_folder(args, "gemma2_flat"), os.path.join("/in", "gemma2_flat"))

    def test_command_for_a_missing_snapshot_is_the_datasets(self):
        for shape in SNAPSHOTS + ["lm128k"]:
            self.assertEqual(peers.lm_command("/d", shape), "python3 bench/lm_data.py --out /d --only lm128k")
        self.assertEqual(peers.lm_command("/d", "lm32k"), "python3 bench/lm_data.py --out /d --only lm32k")
        with tempfile.TemporaryDirectory() as out:
            for shape in peers.LM_SHAPES:  # every command names a dataset lm_data.py accepts
                args = lm_data.parse_args(shlex.split(peers.lm_command(out, shape))[2:])
                self.assertIn(shape, lm_data.shape_names(args.only))

    def test_shapes_flag(self):
        args = peers.make_parser().parse_args(["--shapes", "gemma2_flat,lm128k_s30"])
        self.assertEqual(args.shapes, ["gemma2_flat", "lm128k_s30"])
        with self.assertRaises(SystemExit):
            with open(os.devnull, "w") as null:
                stderr, sys.stderr = sys.stderr, null
                try:
                    peers.make_parser().parse_args(["--shapes", "lm128k_s50"])
                finally:
                    sys.stderr = stderr


class SameShapesEverywhere(unittest.TestCase):
    def test_lm_data_writes_exactly_the_lm_shapes(self):
        self.assertEqual(peers.LM_SHAPES, lm_data.shape_names())
        self.assertEqual([s for s in peers.LM_SHAPES if peers.LM_DATASETS[s] == "lm128k"],
                         lm_data.shape_names("lm128k"))

    def test_cce_bench_knows_the_same_shapes(self):
        if BENCH is None:
            self.fail("needs the path of cce_bench (ctest passes it)")
        proc = subprocess.run([BENCH, "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        lines = proc.stdout.splitlines()
        line = next(l for l in lines if "shapes to run, of: " in l)
        self.assertEqual(line.split("shapes to run, of: ", 1)[1].split(", "), peers.ALL_SHAPES)
        # Its tables: each generated shape's N, D, V, data and seed, each trained-model shape's dataset.
        start = next(i for i, l in enumerate(lines) if l.startswith("generated shapes"))
        self.assertIn("seed %d" % peers.SEED, lines[start])
        generated = {}
        for l in lines[start + 1:start + 1 + len(peers.SHAPES)]:
            name, n, d, v, data, softcap = l.split()
            generated[name] = ((int(n), int(d), int(v)), data, float(softcap) or None)
        self.assertEqual(generated, {s: (peers.SHAPES[s], peers.data_mode(s), peers.softcap_of(s))
                                     for s in peers.SHAPES})
        start = next(i for i, l in enumerate(lines) if l.startswith("trained-model shapes"))
        datasets = dict(l.split() for l in lines[start + 1:start + 1 + len(peers.LM_SHAPES)])
        self.assertEqual(datasets, peers.LM_DATASETS)


class CaseFunctions(unittest.TestCase):
    def test_the_shapes_softcap_is_bound_and_the_ops_scratch_release_kept(self):
        seen = []

        def peer(e, c, t, softcap):
            seen.append(softcap)
            return "loss"

        peer.release_scratch = lambda: "released"
        for softcap in (None, 30.0):
            case = peers.make_case_function(None, None, {"x": peer}, "x", softcap)
            self.assertEqual(case("e", "c", "t"), "loss")
            self.assertEqual(case.release_scratch(), "released")
        self.assertEqual(seen, [None, 30.0])
        plain = peers.make_case_function(None, None, {"y": lambda e, c, t, s: s}, "y", 30.0)
        self.assertFalse(hasattr(plain, "release_scratch"))
        self.assertEqual(plain(1, 2, 3), 30.0)


class QuackPeer(unittest.TestCase):
    """peers.quack_function on a stand-in `quack` package (the real one needs a GPU)."""

    def setUp(self):
        import types
        self.saved = {k: v for k, v in sys.modules.items() if k == "quack" or k.startswith("quack.")}
        self.calls = []

        class Unkeyable:
            pass

        self.unkeyable = Unkeyable
        identity = types.ModuleType("quack.gemm_runtime.identity")

        def strict_key(value, seen):
            if isinstance(value, Unkeyable):
                raise TypeError("no fail-closed semantic key")
            return ("value", value)

        identity.semantic_value_key = strict_key
        lce = types.ModuleType("quack.linear_cross_entropy")
        lce.chunked_linear_cross_entropy = lambda *a, **k: self.calls.append((a, k)) or "loss"
        runtime = types.ModuleType("quack.gemm_runtime")
        runtime.identity = identity
        package = types.ModuleType("quack")
        package.__path__ = []
        package.gemm_runtime, package.linear_cross_entropy = runtime, lce
        sys.modules.update({"quack": package, "quack.gemm_runtime": runtime,
                            "quack.gemm_runtime.identity": identity, "quack.linear_cross_entropy": lce})
        self.identity = identity

    def tearDown(self):
        for k in [k for k in sys.modules if k == "quack" or k.startswith("quack.")]:
            del sys.modules[k]
        sys.modules.update(self.saved)

    def test_unkeyable_values_keyed_by_type_and_repr_others_as_before(self):
        fn, why = peers.quack_function()
        self.assertIsNotNone(fn, why)
        key = self.identity.semantic_value_key
        self.assertEqual(key(3, set()), ("value", 3))
        value = self.unkeyable()
        self.assertEqual(key(value, set())[0], "repr")
        self.assertIn(repr(value), key(value, set()))
        peers.quack_function()  # a second call wraps once, not twice
        self.assertIs(self.identity.semantic_value_key, key)

    def test_calls_the_base_pipeline_in_chunks_of_4096_and_refuses_v_not_a_multiple_of_8(self):
        fn, why = peers.quack_function()
        self.assertIn("use_scaled_exp=False", why)

        class Shaped:
            def __init__(self, *shape):
                self.shape = shape

        e, c, t = Shaped(16, 8), Shaped(64, 8), Shaped(16)
        self.assertEqual(fn(e, c, t, None), "loss")
        (args, kwargs), = self.calls
        self.assertEqual(args, (e, c, t))
        self.assertEqual(kwargs, {"chunk_size": 4096, "reduction": "mean", "use_scaled_exp": False})
        with self.assertRaisesRegex(ValueError, "50257 is not a multiple of 8"):
            fn(e, Shaped(50257, 8), t, None)
        # The stand-in has no softcap parameter: a softcapped case is refused with the reason, never run without it.
        with self.assertRaisesRegex(peers.Unsupported, "no softcap"):
            fn(e, c, t, 30.0)
        self.assertEqual(len(self.calls), 1)

    def test_registered_beside_the_others_and_its_failure_is_a_skip(self):
        import types
        torch = types.SimpleNamespace(compile=None, __version__="stub")
        logged = []
        funcs, skipped = peers.peer_functions(torch, None, logged.append, cce_python="/no/such/build")
        self.assertIn("peer_quack", funcs)
        self.assertIn("peer_quack: chunked_linear_cross_entropy(chunk_size=4096, use_scaled_exp=False)", logged)
        self.assertIn("stage10_plan_per_batch_op", skipped)

        def broken():
            raise RuntimeError("a cutlass-dsl that does not fit")

        real = peers.quack_function
        peers.quack_function = broken
        try:
            funcs, skipped = peers.peer_functions(torch, None, logged.append, cce_python="/no/such/build")
        finally:
            peers.quack_function = real
        self.assertNotIn("peer_quack", funcs)
        self.assertEqual(skipped["peer_quack"],
                         "quack-kernels unusable (RuntimeError: a cutlass-dsl that does not fit): skipped")

    def test_not_installed_is_a_skip_with_the_reason(self):
        for k in [k for k in sys.modules if k == "quack" or k.startswith("quack.")]:
            sys.modules[k] = None  # import fails as for a package that is not there
        fn, why = peers.quack_function()
        self.assertIsNone(fn)
        self.assertEqual(why, "quack-kernels not installed: skipped")
        self.assertIn("peer_quack", peers.IMPLS)
        self.assertEqual(peers.IMPLS[-1], "peer_quack")


class StageFlags(unittest.TestCase):
    """--stage-flags reaches the op's calls as its flags, and the JSON's context."""

    def test_parsed_and_passed_to_the_op(self):
        self.assertEqual(peers.make_parser().parse_args([]).stage_flags, "")
        self.assertEqual(peers.make_parser().parse_args(["--stage-flags", "--dense-head 0.5"]).stage_flags,
                         "--dense-head 0.5")
        self.assertEqual(peers.make_parser().parse_args(["--stage-flags=--keep-all"]).stage_flags, "--keep-all")
        with tempfile.TemporaryDirectory() as build:
            os.makedirs(os.path.join(build, "cce_stages"))
            with open(os.path.join(build, "cce_stages", "__init__.py"), "w") as f:
                f.write("calls = []\n"
                        "def linear_cross_entropy(e, c, t, **kwargs):\n"
                        "    calls.append(kwargs)\n"
                        "    return 0.0\n"
                        "def release_scratch():\n"
                        "    pass\n")
            sys.modules.pop("cce_stages", None)
            try:
                op, why = peers.stage_op_function(build, "--plan dense")
                self.assertEqual(why, "")
                op("e", "c", "t", None)
                import cce_stages
                self.assertEqual(cce_stages.calls, [{"stage": "10_plan_per_batch", "softcap": None,
                                                     "flags": "--plan dense"}])
            finally:
                sys.modules.pop("cce_stages", None)
                sys.path.remove(build)


class TimedInTurns(unittest.TestCase):
    """--interleave: run k of every case before run k + 1 of any; a case that fails leaves the rotation."""

    def test_each_round_takes_every_case_the_order_reversed_every_other_round(self):
        calls = []

        def time_one(name):
            calls.append(name)
            return (float(len(calls)), 0.0)

        times = peers.time_in_turns(["a", "b", "c"], 3, time_one, lambda name, exc: self.fail(name))
        self.assertEqual(calls, ["a", "b", "c", "c", "b", "a", "a", "b", "c"])
        self.assertEqual([r for r, _ in times["a"]], [1.0, 6.0, 7.0])
        self.assertEqual([r for r, _ in times["c"]], [3.0, 4.0, 9.0])

    def test_a_failing_case_leaves_and_the_others_go_on(self):
        calls, failed = [], []

        def time_one(name):
            calls.append(name)
            if name == "b" and calls.count("b") == 2:
                raise RuntimeError("out of memory")
            return (1.0, 0.0)

        times = peers.time_in_turns(["a", "b", "c"], 3, time_one, lambda name, exc: failed.append((name, str(exc))))
        self.assertEqual(calls, ["a", "b", "c", "c", "b", "a", "a", "c"])
        self.assertEqual(failed, [("b", "out of memory")])
        self.assertEqual(sorted(times), ["a", "c"])
        self.assertEqual(len(times["a"]), 3)

    def test_the_flag(self):
        self.assertTrue(peers.make_parser().parse_args(["--interleave"]).interleave)
        self.assertFalse(peers.make_parser().parse_args([]).interleave)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        STAGE01 = sys.argv.pop(1)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        BENCH = sys.argv.pop(1)
    unittest.main(verbosity=2)
