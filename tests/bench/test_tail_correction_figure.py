#!/usr/bin/env python3
"""bench/tail_correction_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) at several seeds; the statistics give the numbers worked
out by hand; a decision on the mean instead of the max, a correction that forgets the target's exclusion, or one
that weights C's first row instead of the tile's mean makes the script's claims fail (exit 1, DOES NOT HOLD). Bad
flags: exit 2, one line.
"""

import math
import os
import subprocess
import sys
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_tail_correction_figure.py")
BENCH = figure_tests.BENCH
figure = figure_tests.load("tail_correction_figure")
run = figure_tests.runner("tail_correction_figure")


BROKEN = """
import sys
import numpy as np
sys.path.insert(0, {bench!r})
import tail_correction_figure as figure
statistics = figure.statistics
def mean_not_max(z, lse):
    m, s = statistics(z, lse)
    tiles = z.reshape(figure.N, figure.TILES, figure.TILE)
    return tiles.mean(axis=2), s
def target_left_in(p, lse, m, s, targets):
    return s * np.exp(m - lse[:, None])
def first_row_not_mean(c):
    return c[::figure.TILE]
{setup}
sys.exit(figure.main(["--out", {out!r}]))
"""


class TailCorrection(unittest.TestCase):
    def test_draws_and_holds(self):
        with tempfile.TemporaryDirectory() as tmp:
            for seed in ("4", "0", "15"):
                out = os.path.join(tmp, f"tail_correction_{seed}.png")
                proc = run("--out", out, "--seed", seed)
                self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
                with open(out, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
                self.assertIn("tiles dropped", proc.stdout)
                self.assertNotIn("DOES NOT HOLD", proc.stderr)

    def test_statistics_by_hand(self):
        import numpy as np
        z = np.zeros((figure.N, figure.V))
        z[:, 0] = math.log(3.0)  # tile 0: one entry e^z = 3, fifteen of 1; the other tiles all 1
        m, s = figure.statistics(z, np.zeros(figure.N))
        self.assertAlmostEqual(m[0, 0], math.log(3.0), places=15)
        self.assertAlmostEqual(s[0, 0], 1.0 + 15.0 / 3.0, places=14)
        self.assertEqual(list(m[0, 1:]), [0.0] * (figure.TILES - 1))
        self.assertEqual(list(s[0, 1:]), [float(figure.TILE)] * (figure.TILES - 1))

    def test_broken_rules_do_not_hold(self):
        cases = (("figure.statistics = mean_not_max", "every p_ij ≤ exp(m_iT − LSE_i)"),
                 ("figure.statistics = mean_not_max", "every entry but the target's has |p − [j = t]| < eps"),
                 ("figure.tail_mass = target_left_in", "dE's correction is exact"),
                 ("figure.tile_means = first_row_not_mean", "Σ_{j∈T} p_ij C_j = M_iT·C̄_T + Σ_j ε_ij δ_j"))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tail_correction.png")
            for setup, claim in cases:
                code = BROKEN.format(bench=BENCH, setup=setup, out=out)
                proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
                self.assertEqual(proc.returncode, 1, setup + proc.stdout + proc.stderr)
                self.assertIn("DOES NOT HOLD: ", proc.stderr, setup)
                self.assertIn(claim, proc.stderr, setup)

    def test_bad_flags_are_one_line_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            for args in (["--bogus"], ["--out"], ["--seed", "x"], ["--seed", "-1"],
                         ["--out", os.path.join(tmp, "tail_correction.svg")],
                         ["--out", os.path.join(tmp, "missing", "tail_correction.png")]):
                proc = run(*args)
                self.assertEqual(proc.returncode, 2, args)
                self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
                self.assertTrue(proc.stderr.startswith("tail_correction_figure.py: "), proc.stderr)
            self.assertEqual(os.listdir(tmp), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
