#!/usr/bin/env python3
"""CPU test of cce_bench's command line: the benchmark names it registers (read
with --benchmark_list_tests, which needs no GPU), the generated shapes
(gemma2_flat after gemma2), the trained-model shapes (lm32k, lm128k and
lm128k's snapshots lm128k_s0 ... lm128k_s300) read from --lm-data, and its
own flags' errors. Nothing here runs a benchmark. Standard library only (the
.npy files are written by hand).

    python3 tests/bench/test_cce_bench_cli.py build/bench/cce_bench
"""

import array
import os
import re
import subprocess
import sys
import tempfile
import unittest

BENCH = None  # set from the command line
GENERATED = ["small", "gpt2", "llama3", "gemma2", "gemma2_flat", "gemma2_softcap"]
LM_SHAPES = ["lm32k", "lm128k", "lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300"]
NAME = re.compile(r"^(cublas_floor|stage\d\d_[a-z0-9_]+)/(loss|loss_grad)/([a-z0-9_]+)"
                  r"/iterations:1/repeats:(\d+)/manual_time$")


def run(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, encoding="utf-8", timeout=60)


def listed(*args):
    proc = run("--benchmark_list_tests", *args)
    if proc.returncode != 0:
        raise AssertionError(f"exit {proc.returncode}: {proc.stderr}")
    return proc.stdout.split()


def shapes_of(names):
    """The shapes of the names, in order of first appearance."""
    out = []
    for name in names:
        shape = NAME.match(name).group(3)
        if shape not in out:
            out.append(shape)
    return out


def write_npy(path, typecode, descr, shape, values):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, ", ".join(str(x) for x in shape) + ("," if len(shape) == 1 else ""))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        f.write(array.array(typecode, values).tobytes())


def write_lm_shape(root, name, n, d, v, targets_n=None):
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    write_npy(os.path.join(folder, "e.npy"), "f", "<f4", (n, d), [0.5] * (n * d))
    write_npy(os.path.join(folder, "c.npy"), "f", "<f4", (v, d), [0.25] * (v * d))
    tn = n if targets_n is None else targets_n
    write_npy(os.path.join(folder, "targets.npy"), "q", "<i8", (tn,), [k % v for k in range(tn)])


class CceBenchCli(unittest.TestCase):
    def test_names_of_one_shape(self):
        names = listed("--shapes=small")
        parsed = [NAME.match(n) for n in names]
        self.assertTrue(all(parsed), names)
        self.assertEqual({m.group(3) for m in parsed}, {"small"})
        self.assertEqual({m.group(4) for m in parsed}, {"50"})
        keys = [f"{m.group(1)}/{m.group(2)}" for m in parsed]
        # The floors come first: the stages' floor_ratio divides by them.
        self.assertEqual(keys[:2], ["cublas_floor/loss", "cublas_floor/loss_grad"])
        self.assertIn("stage01_materialized/loss", keys)
        self.assertIn("stage01_materialized/loss_grad", keys)
        self.assertEqual(len(keys), len(set(keys)))
        # Every stage has a loss case; loss_grad only where it has a backward (never without loss).
        for key in keys:
            if key.endswith("/loss_grad"):
                self.assertIn(key[: -len("_grad")], keys)

    def test_every_shape_by_default_in_order(self):
        with tempfile.TemporaryDirectory() as empty:  # no trained-model data there
            names = listed(f"--lm-data={empty}")
        self.assertEqual(shapes_of(names), GENERATED)

    def test_trained_model_shapes_from_their_files(self):
        with tempfile.TemporaryDirectory() as lm:
            write_lm_shape(lm, "lm32k", 6, 4, 10)
            # By default: the generated shapes, then the lm shapes whose files are there, silently.
            proc = run("--benchmark_list_tests", f"--lm-data={lm}")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(shapes_of(proc.stdout.split()), GENERATED + ["lm32k"])
            self.assertEqual(proc.stderr, "")
            names = listed("--shapes=lm32k", "--lm-data", lm)
            keys = [f"{NAME.match(n).group(1)}/{NAME.match(n).group(2)}" for n in names]
            self.assertEqual(keys[:2], ["cublas_floor/loss", "cublas_floor/loss_grad"])
            self.assertIn("stage07_filter_sort/loss_grad", keys)
            # Asked for but missing: one line naming the command that makes it; the others still run.
            proc = run("--benchmark_list_tests", "--shapes=lm128k,lm32k,small", f"--lm-data={lm}")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(shapes_of(proc.stdout.split()), ["small", "lm32k"])
            lines = proc.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, proc.stderr)
            self.assertIn("cce_bench: lm128k skipped:", lines[0])
            self.assertIn("has no e.npy", lines[0])
            self.assertIn(f"python3 bench/lm_data.py --out {lm} --only lm128k", lines[0])
            # Files whose shapes disagree: skipped with the reader's reason, by default too.
            write_lm_shape(lm, "lm128k", 6, 4, 10, targets_n=5)
            proc = run("--benchmark_list_tests", f"--lm-data={lm}")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(shapes_of(proc.stdout.split())[-1], "lm32k")
            self.assertIn("lm128k skipped:", proc.stderr)
            self.assertIn("N differs", proc.stderr)

    def test_gemma2_flat_is_a_generated_shape(self):
        names = listed("--shapes=gemma2_flat")
        self.assertEqual(shapes_of(names), ["gemma2_flat"])
        keys = [f"{NAME.match(n).group(1)}/{NAME.match(n).group(2)}" for n in names]
        self.assertEqual(keys[:2], ["cublas_floor/loss", "cublas_floor/loss_grad"])
        self.assertEqual(keys, [f"{NAME.match(n).group(1)}/{NAME.match(n).group(2)}" for n in listed("--shapes=gemma2")])
        # Needs no files, whatever --lm-data holds; canonical order: right after gemma2.
        with tempfile.TemporaryDirectory() as empty:
            proc = run("--benchmark_list_tests", "--shapes=gemma2_flat,small,gemma2", f"--lm-data={empty}")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stderr, "")
        self.assertEqual(shapes_of(proc.stdout.split()), ["small", "gemma2", "gemma2_flat"])

    def test_gemma2_softcap_is_gemma2_with_gemma2s_softcap(self):
        names = listed("--shapes=gemma2_softcap")
        self.assertEqual(shapes_of(names), ["gemma2_softcap"])
        keys = [f"{NAME.match(n).group(1)}/{NAME.match(n).group(2)}" for n in names]
        self.assertEqual(keys, [f"{NAME.match(n).group(1)}/{NAME.match(n).group(2)}" for n in listed("--shapes=gemma2")])
        proc = run("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = {l.split()[0]: l.split()[1:] for l in proc.stdout.splitlines() if l.startswith("  gemma2")}
        self.assertEqual(rows["gemma2_softcap"], ["8192", "2304", "256000", "realistic", "30"])
        self.assertEqual(rows["gemma2"], ["8192", "2304", "256000", "realistic", "0"])

    def test_lm128k_snapshots_from_their_files(self):
        with tempfile.TemporaryDirectory() as lm:
            for k, name in enumerate(["lm128k_s0", "lm128k_s100", "lm128k"]):
                write_lm_shape(lm, name, 6 + k, 4, 10)
            # By default: the ones whose files are there, in the canonical order (lm128k, then its snapshots).
            proc = run("--benchmark_list_tests", f"--lm-data={lm}")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stderr, "")
            self.assertEqual(shapes_of(proc.stdout.split()), GENERATED + ["lm128k", "lm128k_s0", "lm128k_s100"])
            # Each read from its own folder: asked for alone, it runs alone.
            self.assertEqual(shapes_of(listed("--shapes=lm128k_s100", f"--lm-data={lm}")), ["lm128k_s100"])
            # Asked for but missing: the command named is the dataset's, which writes the snapshots too.
            proc = run("--benchmark_list_tests", "--shapes=lm128k_s300,lm128k_s30,lm128k_s0", f"--lm-data={lm}")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(shapes_of(proc.stdout.split()), ["lm128k_s0"])
            lines = proc.stderr.strip().splitlines()
            self.assertEqual(len(lines), 2, proc.stderr)
            self.assertIn("cce_bench: lm128k_s30 skipped:", lines[0])
            self.assertIn("cce_bench: lm128k_s300 skipped:", lines[1])
            for line in lines:
                self.assertIn(f"(write it with python3 bench/lm_data.py --out {lm} --only lm128k)", line)

    def test_help_lists_every_shape(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("shapes to run, of: " + ", ".join(GENERATED + LM_SHAPES) + "\n", proc.stdout)

    def test_shapes_and_calls(self):
        names = listed("--shapes", "gemma2,gpt2", "--calls=3")
        shapes = {NAME.match(n).group(3) for n in names}
        self.assertEqual(shapes, {"gpt2", "gemma2"})
        self.assertEqual({NAME.match(n).group(4) for n in names}, {"3"})
        self.assertEqual(NAME.match(names[0]).group(3), "gpt2")  # canonical order, not the flag's

    def test_filter_is_google_benchmarks(self):
        names = listed("--shapes=small", "--benchmark_filter=^cublas_floor/")
        self.assertEqual([NAME.match(n).group(1) for n in names], ["cublas_floor"] * 2)

    def test_bad_flags(self):
        for args, fragment in [
            (["--shapes=small,bogus"], "unknown shape 'bogus' (known: " + ", ".join(GENERATED + LM_SHAPES) + ")"),
            (["--shapes=lm128k_s50"], "unknown shape 'lm128k_s50'"),
            (["--shapes=gemma2_random"], "unknown shape 'gemma2_random'"),
            (["--shapes=lm32k", "--lm-data=/nonexistent/cce-lm-data"], "no shape left to run"),
            (["--lm-data="], "--lm-data expects a directory"),
            (["--lm-data"], "--lm-data needs a value"),
            (["--shapes="], "unknown shape ''"),
            (["--shapes"], "--shapes needs a value"),
            (["--calls=0"], "--calls expects an integer >= 1, got '0'"),
            (["--calls=5x"], "--calls expects an integer >= 1"),
            (["--iters=3"], "--iters is gone: --calls=K sets the timed calls per case (default 50)"),
            (["--no_such_flag"], "unrecognized command-line flag: --no_such_flag"),
        ]:
            with self.subTest(args=args):
                proc = run(*args)
                self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                self.assertIn(fragment, proc.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_cce_bench_cli.py PATH/TO/cce_bench [unittest args]")
    BENCH = sys.argv.pop(1)
    unittest.main(verbosity=2)
