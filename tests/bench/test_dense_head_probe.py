#!/usr/bin/env python3
"""CPU test of bench/dense_head_probe.py without PyTorch or a GPU:

- head_estimates on hand-made per-tile counts: a head of H tiles takes H · blocks pairs, the sparse plan the kept
  pairs after it, each priced at its rate; heads longer than the vocabulary are left out;
- its command line: bad values -> exit status 2 with the reason; without PyTorch (a stand-in torch.py that raises
  ImportError, first on PYTHONPATH, so the test means the same on a machine that has PyTorch) a SKIPPED line and
  exit status 77.

    python3 tests/bench/test_dense_head_probe.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "dense_head_probe.py")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import dense_head_probe  # noqa: E402


class HeadEstimates(unittest.TestCase):
    def test_pairs_and_prices(self):
        counts = [4, 4, 1, 0, 1]  # 5 tiles of 4 token blocks: two dense tiles, then scattered pairs
        rows = dense_head_probe.head_estimates(counts, blocks=4, d=100000, dense_tflops=600.0, sparse_tflops=200.0)
        self.assertEqual([r["head_tiles"] for r in rows], [0, 1, 2, 4])  # 8 > 5 tiles: left out
        by_head = {r["head_tiles"]: r for r in rows}
        self.assertEqual((by_head[0]["head_pairs"], by_head[0]["sparse_pairs"]), (0, 10))
        self.assertEqual((by_head[2]["head_pairs"], by_head[2]["sparse_pairs"]), (8, 2))
        self.assertEqual((by_head[4]["head_pairs"], by_head[4]["sparse_pairs"]), (16, 1))
        flop = 3 * 2 * 128 * 128 * 100000
        self.assertAlmostEqual(by_head[2]["estimate_ms"], round((8 / 600e12 + 2 / 200e12) * flop * 1e3, 3))
        # Dense tiles cost less taken whole (rate 3x) than as kept pairs; the sparse tail more than it saves.
        best = min(rows, key=lambda r: r["estimate_ms"])
        self.assertEqual(best["head_tiles"], 2)


class CommandLine(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.no_torch = os.path.join(self.tmp.name, "stand-in")
        os.makedirs(self.no_torch)
        with open(os.path.join(self.no_torch, "torch.py"), "w") as f:
            f.write("raise ImportError('stand-in: no PyTorch')\n")

    def tearDown(self):
        self.tmp.cleanup()

    def run_probe(self, *args, no_torch=False):
        env = dict(os.environ)
        if no_torch:
            env["PYTHONPATH"] = self.no_torch + os.pathsep + env.get("PYTHONPATH", "")
        return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env)

    def test_bad_values(self):
        for args in (["x", "--out", "o.json", "--rows-per-pass", "0"],
                     ["x", "--out", "o.json", "--dense-tflops", "-1"]):
            result = self.run_probe(*args)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn("must be positive", result.stderr)
        result = self.run_probe("x")  # no --out
        self.assertEqual(result.returncode, 2)

    def test_without_torch(self):
        result = self.run_probe(self.tmp.name, "--out", os.path.join(self.tmp.name, "o.json"), no_torch=True)
        self.assertEqual(result.returncode, 77, result.stderr)
        self.assertIn("SKIPPED", result.stdout)


if __name__ == "__main__":
    unittest.main()
