#!/usr/bin/env python3
"""CPU test of bench/lm_data.py without PyTorch or a GPU:

- its command line: --help, and bad values -> exit status 2 with one line;
- without PyTorch, or with a PyTorch that sees no CUDA device, one line and
  exit status 77 (a stand-in torch.py on PYTHONPATH plays either part, so the
  test means the same on a machine that has PyTorch);
- its statistics functions on hand-made examples (NumPy): the kept-tile
  fraction with the target handled apart and with stage 07's rule, in the
  natural and the sorted vocabulary order, entropy, max probability, counts;
- the small pure helpers (held-out split, windows, vocabulary step-down);
- lm128k's snapshots: which training steps are exported (snapshot_steps, on
  fake training lengths), where the training loop takes them
  (training_events), the shape names, and the removal of a snapshot a shorter
  run does not reach.

When PyTorch is importable, the GPU statistics code (softmax_stats_torch) is
also compared with the NumPy reference on the CPU; otherwise that test is
skipped. Needs NumPy (python3-numpy), nothing else.

    python3 tests/bench/test_lm_data.py
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "lm_data.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))

import lm_data  # noqa: E402  (the module imports neither torch nor numpy at import time)

try:
    import numpy as np
except ImportError:  # fail loudly: CI installs python3-numpy
    np = None

try:
    import torch
except ImportError:
    torch = None


def run(*args, pythonpath=None):
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, encoding="utf-8",
                          env=env, timeout=120)


class CommandLine(unittest.TestCase):
    def test_help(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for text in ("lm32k", "lm128k", "--allow-cpu", "--only", "--stats-dir", "kept_frac", "byte_fallback",
                     "exits with 77"):
            self.assertIn(text, proc.stdout)

    def test_bad_values_are_one_line_and_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            a_file = os.path.join(tmp, "a_file")
            with open(a_file, "w") as f:
                f.write("x")
            for args, fragment in [
                (["--steps", "0"], "argument --steps: expected an integer >= 1, got '0'"),
                (["--n", "-5"], "argument --n: expected an integer >= 1"),
                (["--batch", "two"], "argument --batch: expected an integer >= 1, got 'two'"),
                (["--lr", "0"], "argument --lr: expected a number > 0"),
                (["--corpus-mb", "nan"], "argument --corpus-mb: expected a number > 0"),
                (["--warmup", "-1"], "argument --warmup: expected an integer >= 0"),
                (["--only", "lm64k"], "argument --only: invalid choice: 'lm64k'"),
                (["--heldout-percent", "60"], "--heldout-percent must be at most 50"),
                (["--seq", "1"], "--seq must be at least 2"),
                (["--vocab-lm32k", "100"], "--vocab-lm32k must be at least 512"),
                (["--width", "100", "--heads", "3"], "lm32k: --width 100 is not a multiple of --heads 3"),
                (["--only", "lm128k", "--width", "96", "--heads", "64"], "lm128k: --width 96 is not a multiple"),
                (["--eval-tokens", "0"], "argument --eval-tokens: expected an integer >= 1, got '0'"),
                (["--out", a_file], "--out %s is not a directory" % a_file),
                (["--stats-dir", a_file], "--stats-dir %s is not a directory" % a_file),
                (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
            ]:
                with self.subTest(args=args):
                    proc = run(*args)
                    self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                    lines = proc.stderr.strip().splitlines()
                    self.assertEqual(len(lines), 1, proc.stderr)
                    self.assertTrue(lines[0].startswith("lm_data.py: error: "), lines[0])
                    self.assertIn(fragment, lines[0])
                    self.assertEqual(proc.stdout, "")

    def test_without_pytorch_exit_77(self):
        with tempfile.TemporaryDirectory() as fake:
            with open(os.path.join(fake, "torch.py"), "w") as f:
                f.write("raise ImportError(\"No module named 'torch'\", name='torch')\n")
            for extra in ([], ["--allow-cpu"]):
                proc = run("--out", os.path.join(fake, "out"), *extra, pythonpath=fake)
                self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
                lines = (proc.stdout + proc.stderr).strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
                self.assertIn("lm_data.py: SKIPPED: PyTorch not found", lines[0])
                self.assertFalse(os.path.exists(os.path.join(fake, "out")), "nothing is written")

    def test_without_gpu_exit_77(self):
        with tempfile.TemporaryDirectory() as fake:
            with open(os.path.join(fake, "torch.py"), "w") as f:
                f.write("__version__ = '0.0-stand-in'\n"
                        "class cuda:\n"
                        "    @staticmethod\n"
                        "    def is_available():\n"
                        "        return False\n")
            proc = run("--out", os.path.join(fake, "out"), pythonpath=fake)
            self.assertEqual(proc.returncode, 77, proc.stdout + proc.stderr)
            lines = (proc.stdout + proc.stderr).strip().splitlines()
            self.assertEqual(len(lines), 1, proc.stdout + proc.stderr)
            self.assertIn("lm_data.py: SKIPPED: PyTorch 0.0-stand-in sees no CUDA device", lines[0])
            self.assertIn("--allow-cpu", lines[0])


class Helpers(unittest.TestCase):
    def test_heldout_split_is_a_stable_share(self):
        keys = ["site-packages:pkg/mod%d.py" % k for k in range(4000)]
        held = [lm_data.is_heldout(lm_data.file_key_digest(k), 3.0) for k in keys]
        self.assertEqual(held, [lm_data.is_heldout(lm_data.file_key_digest(k), 3.0) for k in keys])
        self.assertTrue(60 <= sum(held) <= 180, sum(held))  # about 3 % of 4000
        # A larger share holds out a superset.
        more = [lm_data.is_heldout(lm_data.file_key_digest(k), 10.0) for k in keys]
        self.assertTrue(all(m for h, m in zip(held, more) if h))

    def test_window_starts(self):
        self.assertEqual(lm_data.window_starts(100, 1, 11), [44])
        starts = lm_data.window_starts(100, 4, 11)
        self.assertEqual(starts, [0, 30, 59, 89])
        self.assertTrue(all(b - a >= 11 for a, b in zip(starts, starts[1:])))  # no overlap when they fit

    def test_vocabulary_step_down(self):
        msg = ("INTERNAL: src/trainer_interface.cc(744) [(trainer_spec_.vocab_size()) == "
               "(model_proto->pieces_size())] Vocabulary size too high (128000). Please set it to a value <= 123223.")
        self.assertEqual(lm_data.smaller_vocab(msg, 128000), 123223)
        self.assertEqual(lm_data.smaller_vocab("vocab_size is too large", 4000), 3000)
        self.assertIsNone(lm_data.smaller_vocab("cannot open input", 4000))

    def test_learning_rate_schedule(self):
        self.assertAlmostEqual(lm_data.lr_at(0, 100, 10, 1.0), 0.1)
        self.assertAlmostEqual(lm_data.lr_at(9, 100, 10, 1.0), 1.0)
        self.assertAlmostEqual(lm_data.lr_at(10, 100, 10, 1.0), 1.0)
        self.assertAlmostEqual(lm_data.lr_at(100, 100, 10, 1.0), 0.1)

    def test_estimate_is_within_one_command(self):
        args = lm_data.parse_args([])
        for name in lm_data.DATASETS:
            total, parts = lm_data.estimate_seconds(args, name)
            self.assertGreater(parts["training"], 60)
            self.assertLess(total, 8 * 60, (name, parts))  # the 10-minute command, with a margin


class Snapshots(unittest.TestCase):
    PLANNED = lm_data.DATASETS["lm128k"]["snapshots"]

    def test_planned_steps(self):
        self.assertEqual(tuple(self.PLANNED), (0, 30, 100, 300))
        self.assertEqual(tuple(lm_data.DATASETS["lm32k"]["snapshots"]), ())
        # The default training reaches every planned step.
        self.assertEqual(lm_data.snapshot_steps(self.PLANNED, lm_data.DATASETS["lm128k"]["steps"]), [0, 30, 100, 300])

    def test_export_step_rule(self):
        # The steps that exist: k <= steps (k = steps is the final model); 0, the untrained model, always.
        for steps, expected in [(800, [0, 30, 100, 300]), (301, [0, 30, 100, 300]), (300, [0, 30, 100, 300]),
                                (299, [0, 30, 100]), (120, [0, 30, 100]), (100, [0, 30, 100]), (99, [0, 30]),
                                (30, [0, 30]), (29, [0]), (1, [0])]:
            with self.subTest(steps=steps):
                self.assertEqual(lm_data.snapshot_steps(self.PLANNED, steps), expected)
        self.assertEqual(lm_data.snapshot_steps((300, 0, 30, 0, -1), 400), [0, 30, 300])  # sorted, once, k >= 0
        self.assertEqual(lm_data.snapshot_steps((), 800), [])

    def test_training_loop_order(self):
        # A fake training of 120 steps: the snapshot of step k comes after exactly k updates; 300 never comes.
        snaps = lm_data.snapshot_steps(self.PLANNED, 120)
        events = list(lm_data.training_events(120, snaps))
        self.assertEqual([step for kind, step in events if kind == "train"], list(range(120)))
        taken = [(step, sum(1 for kind, _ in events[:i] if kind == "train"))
                 for i, (kind, step) in enumerate(events) if kind == "snapshot"]
        self.assertEqual(taken, [(0, 0), (30, 30), (100, 100)])
        self.assertEqual(events[0], ("snapshot", 0))  # the untrained model, before the first update
        # A snapshot at the last step comes after the last update.
        events = list(lm_data.training_events(30, lm_data.snapshot_steps(self.PLANNED, 30)))
        self.assertEqual(events[-2:], [("train", 29), ("snapshot", 30)])
        self.assertEqual(len(events), 32)
        self.assertEqual(list(lm_data.training_events(3, [])), [("train", 0), ("train", 1), ("train", 2)])

    def test_shape_names(self):
        self.assertEqual(lm_data.snapshot_name("lm128k", 30), "lm128k_s30")
        self.assertEqual(lm_data.shape_names("lm128k"),
                         ["lm128k", "lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300"])
        self.assertEqual(lm_data.shape_names("lm32k"), ["lm32k"])
        self.assertEqual(lm_data.shape_names(), ["lm32k"] + lm_data.shape_names("lm128k"))

    def test_stale_snapshots_are_removed(self):
        with tempfile.TemporaryDirectory() as out:
            def make(name, files):
                os.makedirs(os.path.join(out, name), exist_ok=True)
                for f in files:
                    with open(os.path.join(out, name, f), "w") as fh:
                        fh.write("x")
            make("lm128k_s300", ["e.npy", "c.npy", "targets.npy", "stats.json"])
            make("lm128k_s100", ["e.npy", "notes.txt"])
            make("lm128k_s30", ["e.npy", "c.npy", "targets.npy", "stats.json"])
            removed = lm_data.remove_stale_snapshots(out, "lm128k", [100, 300])
            self.assertEqual(sorted(os.path.relpath(p, out) for p in removed),
                             sorted([os.path.join("lm128k_s300", f) for f in lm_data.ARRAY_FILES]
                                    + [os.path.join("lm128k_s100", "e.npy")]))
            self.assertFalse(os.path.exists(os.path.join(out, "lm128k_s300")))  # emptied, then removed
            self.assertEqual(os.listdir(os.path.join(out, "lm128k_s100")), ["notes.txt"])  # not ours: kept
            self.assertEqual(len(os.listdir(os.path.join(out, "lm128k_s30"))), 4)  # a step this run writes
            self.assertEqual(lm_data.remove_stale_snapshots(out, "lm128k", [100, 300]), [])

    def test_estimate_counts_the_snapshots(self):
        args = lm_data.parse_args([])
        self.assertGreater(lm_data.estimate_seconds(args, "lm128k")[1]["snapshots"], 0)
        self.assertEqual(lm_data.estimate_seconds(args, "lm32k")[1]["snapshots"], 0)
        fewer = lm_data.parse_args(["--steps", "50"])
        self.assertLess(lm_data.estimate_seconds(fewer, "lm128k")[1]["snapshots"],
                        lm_data.estimate_seconds(args, "lm128k")[1]["snapshots"])

    def test_help_describes_them(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for text in ("lm128k_s0", "lm128k_s300", "--only lm128k` writes all five", "k <= --steps",
                     "torch.no_grad()"):
            self.assertIn(text, proc.stdout)


class Statistics(unittest.TestCase):
    # 4 rows, 6 vocabulary entries; tiles of 2 rows x 2 entries: 2 x 3 tiles.
    P = [[0.70, 0.20, 0.05, 0.03, 0.01, 0.01],
         [0.01, 0.01, 0.90, 0.05, 0.02, 0.01],
         [0.50, 0.01, 0.01, 0.01, 0.01, 0.46],
         [0.02, 0.02, 0.02, 0.02, 0.02, 0.90]]
    T = [0, 3, 5, 5]

    def setUp(self):
        if np is None:
            self.fail("needs NumPy: apt-get install python3-numpy")
        self.p = np.array(self.P)
        self.t = np.array(self.T)

    def test_target_handled_apart(self):
        # eps 0.1: non-target entries >= 0.1 are (0,1) 0.20, (1,2) 0.90, (2,0) 0.50 -> tiles (0,0), (0,1), (1,0).
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.1, 2, 2), (3, 6))
        # eps 0.04 adds (0,2) 0.05, in tile (0,1), already kept; (1,3) 0.05 is a target: still 3.
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.04, 2, 2), (3, 6))
        # eps 0.02 adds (1,4) 0.02 -> tile (0,2), and the rows 2-3 entries of 0.02 in tiles (1,0) (1,1) (1,2).
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.02, 2, 2), (6, 6))
        # One tile of everything.
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.95, 4, 6), (0, 1))

    def test_stage07_rule_keeps_target_tiles(self):
        # |p - 1| at the targets: 0.30 (0,0), 0.95 (1,3), 0.54 (2,5), 0.10 (3,5): tiles (0,0), (0,1), (1,2) and
        # the non-target (1,0) for 0.50, at eps 0.1.
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.1, 2, 2, rule="stage07"), (4, 6))
        a = lm_data.filter_matrix_numpy(self.p, self.t, "stage07")
        self.assertAlmostEqual(a[3, 5], 0.10)
        self.assertAlmostEqual(a[0, 0], 0.30)

    def test_order_and_edges(self):
        # Entries 2 and 5 side by side: tile columns {2,5}, {0,1}, {3,4}.
        order = np.array([2, 5, 0, 1, 3, 4])
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.1, 2, 2, order), (3, 6))
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, self.t, 0.3, 2, 2, order), (2, 6))  # 0.90 and 0.50
        # Partial tiles at the edges count: 3 rows x 6 entries in tiles of 2 x 4 -> 2 x 2 tiles.
        self.assertEqual(lm_data.kept_tiles_numpy(self.p[:3], self.t[:3], 0.95, 2, 4), (0, 4))

    def test_ignored_rows_keep_nothing(self):
        t = np.array([0, -100, 5, 5])
        self.assertEqual(lm_data.kept_tiles_numpy(self.p, t, 0.1, 2, 2), (2, 6))  # row 1's 0.90 is gone

    def test_row_statistics(self):
        # Two rows whose softmax is known: [ln 3, ln 1, ln 1, -inf-ish] -> p = [0.6, 0.2, 0.2, ~0].
        e = np.array([[1.0, 0.0], [0.0, 1.0]])
        c = np.array([[math.log(3.0), 0.0], [0.0, 0.0], [0.0, 0.0], [-50.0, 0.0]])
        t = np.array([1, 2])
        stats = lm_data.softmax_stats_numpy(e, c, t, eps_exponents=(2,), tile_rows=1, tile_cols=(2,))
        # Row 0: p = 0.6, 0.2, 0.2, ~0; row 1: uniform 0.25.
        ent0 = -(0.6 * math.log(0.6) + 2 * 0.2 * math.log(0.2))
        self.assertAlmostEqual(stats["entropy"], (ent0 + math.log(4.0)) / 2, places=9)
        self.assertAlmostEqual(stats["max_prob"], (0.6 + 0.25) / 2, places=9)
        self.assertAlmostEqual(stats["loss"], (-math.log(0.2) - math.log(0.25)) / 2, places=9)
        self.assertAlmostEqual(stats["target_prob"], (0.2 + 0.25) / 2, places=9)
        self.assertEqual(stats["entries_ge_2^-12"], (3 + 4) / 2)
        # Mean sorted probabilities: (0.6+0.25)/2, (0.2+0.25)/2, ..., the 4th is (~0 + 0.25)/2 >= 2^-12.
        self.assertIsNone(stats["k_mean_prob_below_2^-12"])
        self.assertEqual(lm_data.k_mean_below([0.5, 0.1, 1e-4, 0.0], 2.0 ** -12), 3)
        # Ebar = (0.5, 0.5): scores C_j . Ebar = 0.549, 0, 0, -25 -> order 0, 1, 2, 3.
        self.assertEqual(list(lm_data.vocab_order_numpy(e, c, t)), [0, 1, 2, 3])
        # eps 1/4, one row per tile, 2 entries: row 0 keeps {0,1} (0.6; target 1 apart) but not {2,3} (0.2 < 0.25);
        # row 1 keeps both (0.25 >= 0.25 at entries 0, 1, 3) -> 3 of 4.
        self.assertAlmostEqual(stats["kept_frac"]["natural"]["1x2"]["2^-2"], 3 / 4)
        self.assertAlmostEqual(stats["kept_frac"]["sorted"]["1x2"]["2^-2"], 3 / 4)

    def test_compare_stats(self):
        a = {"x": 1.0, "y": {"z": [1, 2]}, "k": None}
        self.assertEqual(lm_data.compare_stats(a, {"x": 1.0 + 1e-12, "y": {"z": [1, 2]}, "k": None}), [])
        self.assertEqual(len(lm_data.compare_stats(a, {"x": 1.1, "y": {"z": [1, 3]}, "k": 4})), 3)

    @unittest.skipIf(torch is None, "PyTorch not installed: the GPU statistics code is checked on GPU machines")
    def test_torch_statistics_match_numpy(self):
        rng = np.random.default_rng(7)
        n, d, v = 300, 16, 700  # partial tiles at both edges
        e = rng.normal(size=(n, d)).astype(np.float32)
        c = (rng.normal(size=(v, d)) * np.linspace(0.2, 3.0, v)[:, None]).astype(np.float32)
        t = rng.integers(0, v, size=n)
        t[5] = -100
        ref = lm_data.softmax_stats_numpy(e, c, t)
        got = lm_data.softmax_stats_torch(torch, torch.from_numpy(e), torch.from_numpy(c), torch.from_numpy(t),
                                          chunk_tiles=1)
        self.assertEqual(lm_data.compare_stats(got, ref), [])
        kept = got["kept_frac"]["sorted"]["128x128"]
        self.assertTrue(0 < kept["2^-8"] <= kept["2^-12"] <= kept["2^-16"] <= 1, kept)


if __name__ == "__main__":
    unittest.main(verbosity=2)
