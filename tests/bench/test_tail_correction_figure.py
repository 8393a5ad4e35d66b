#!/usr/bin/env python3
"""bench/tail_correction_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) at several seeds; the statistics give the numbers worked
out by hand; a decision on the mean instead of the max, a correction that forgets the target's exclusion, or one
that weights C's first row instead of the tile's mean makes the script's claims fail (exit 1, DOES NOT HOLD). Bad
flags: exit 2, one line.
"""

import math
import os
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
        figure_tests.check_draws(self, run, "tail_correction", ["tiles dropped"], seeds=("4", "0", "15"))

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
        cases = (("figure.statistics = mean_not_max", ["every p_ij ≤ exp(m_iT − LSE_i)",
                                                       "every entry but the target's has |p − [j = t]| < eps"]),
                 ("figure.tail_mass = target_left_in", ["dE's correction is exact"]),
                 ("figure.tile_means = first_row_not_mean", ["Σ_{j∈T} p_ij C_j = M_iT·C̄_T + Σ_j ε_ij δ_j"]))
        with tempfile.TemporaryDirectory() as tmp:
            for setup, claims in cases:
                code = BROKEN.format(bench=BENCH, setup=setup, out=os.path.join(tmp, "tail_correction.png"))
                figure_tests.check_does_not_hold(self, code, claims)

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "tail_correction")


if __name__ == "__main__":
    unittest.main(verbosity=2)
