#!/usr/bin/env python3
"""bench/filter_sort_figure.py (NumPy and Matplotlib; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) and its claims
hold on several seeds; the rule and the key give what stage 07's code gives
on a hand-made example. A flat vocabulary (sorting cannot help), a filter
that skips tiles holding entries up to 4·eps, and another eps than 2⁻¹² each
make the claims fail (exit 1, DOES NOT HOLD). Bad flags: exit 2, one line.
"""

import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_filter_sort_figure.py")
import numpy as np  # noqa: E402
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("filter_sort_figure")
figure = figure_tests.load("filter_sort_figure")
run = figure_tests.runner("filter_sort_figure")


BROKEN = """
import sys
sys.path.insert(0, {bench!r})
import filter_sort_figure as figure
{patch}
sys.exit(figure.main(["--out", {out!r}]))
"""
FLAT = "figure.ZIPF_SLOPE = 0.0  # no popular entries"
LOOSE_FILTER = ("import numpy as np\n"
                "figure.keep_tile = lambda u, eps: bool(eps <= 0 or np.any(np.abs(u) >= 4 * eps))")
OTHER_EPS = "figure.EPS = 2.0 ** -8"


class FilterSort(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "filter_sort",
                                 ["64 tokens × 128 entries in 8 × 16 tiles of 8 × 8; eps 2^-12"], seeds=("7", "0", "23"))

    def test_rule_and_key_by_hand(self):
        self.assertEqual(figure.EPS, 2.0 ** -12)
        self.assertTrue(figure.keep_tile(np.array([[0.0, -figure.EPS]]), figure.EPS))       # |u| >= eps: kept
        self.assertFalse(figure.keep_tile(np.array([[0.0, figure.EPS * 0.999]]), figure.EPS))
        self.assertTrue(figure.keep_tile(np.zeros((2, 2)), 0.0))                             # eps 0: every tile
        # descending keys, ties in index order (a stable radix sort)
        self.assertEqual(figure.vocabulary_order(np.array([1.0, 3.0, 1.0, 2.0])).tolist(), [1, 3, 0, 2])
        z = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
        self.assertEqual(figure.sort_key(z).tolist(), [4.0, -2.0, -0.5])
        # a target entry's u is p − 1, scaled by softcap′
        targets = np.array([2, 0])
        u = figure.unscaled_gradient(z, targets)
        p = np.exp(z - figure.lse(z)[:, None])
        self.assertAlmostEqual(u[0, 2], (p[0, 2] - 1.0) * (1.0 - (0.5 / figure.SOFTCAP) ** 2), places=15)
        self.assertAlmostEqual(u[1, 1], p[1, 1], places=15)

    def test_broken_rules_do_not_hold(self):
        cases = ((FLAT, "sorting keeps strictly fewer tiles than the natural order"),
                 (LOOSE_FILTER, "every voting entry of a skipped tile has |u_ij| < eps"),
                 (LOOSE_FILTER, "within docs/tolerances.md's allowance"),
                 (OTHER_EPS, "under half a bf16 unit in the last place of any value >= 2^-4"))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "filter_sort.png")
            for patch, claim in cases:
                figure_tests.check_does_not_hold(self, BROKEN.format(bench=BENCH, patch=patch, out=out), [claim])

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "filter_sort")


if __name__ == "__main__":
    unittest.main(verbosity=2)
