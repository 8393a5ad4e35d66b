#!/usr/bin/env python3
"""bench/online_softmax_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG); the add and merge
rules give the numbers worked out by hand; an add that skips the rescale, or a
merge that skips it or its early return for two empty states, makes the
script's claims fail (exit 1, DOES NOT HOLD). Bad flags: exit 2, one line.
"""

import math
import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_online_softmax_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("online_softmax_figure")
figure = figure_tests.load("online_softmax_figure")
run = figure_tests.runner("online_softmax_figure")


BROKEN = """
import math
import sys
sys.path.insert(0, {bench!r})
import online_softmax_figure as figure
def add_without_rescale(state, z):
    m, s = state
    return (z, s + 1.0) if z > m else (m, s + math.exp(z - m))
def merge_without_rescale(a, b):
    return max(a[0], b[0]), a[1] + b[1]
def merge_without_early_return(a, b):
    m = max(a[0], b[0])
    return m, a[1] * math.exp(a[0] - m) + b[1] * math.exp(b[0] - m)
figure.{name} = {broken}
sys.exit(figure.main(["--out", {out!r}]))
"""


class OnlineSoftmax(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "online_softmax", ["48 logits"], seeds=("2", "0", "11"))

    def test_rules_by_hand(self):
        state = figure.add(figure.EMPTY, 1.0)
        self.assertEqual(state, (1.0, 1.0))                    # exp(−∞) = 0: the first add
        state = figure.add(state, 0.0)
        self.assertEqual(state, (1.0, 1.0 + math.exp(-1.0)))  # no new max: + exp(z − m)
        state = figure.add(state, 3.0)                         # a new max: s·exp(1 − 3) + 1
        self.assertAlmostEqual(state[1], (1.0 + math.exp(-1.0)) * math.exp(-2.0) + 1.0, places=15)
        self.assertAlmostEqual(figure.lse(state), math.log(math.e + 1.0 + math.exp(3.0)), places=14)
        merged = figure.merge((1.0, 2.0), (3.0, 1.0))
        self.assertEqual(merged, (3.0, 2.0 * math.exp(-2.0) + 1.0))
        self.assertEqual(figure.merge(figure.EMPTY, figure.EMPTY), figure.EMPTY)
        self.assertTrue(math.isnan(figure.add(figure.EMPTY, -math.inf)[1]))  # as OnlineSoftmax::add
        self.assertEqual(figure.fold_chunk(figure.EMPTY, [-math.inf] * 4), figure.EMPTY)

    def test_broken_rules_do_not_hold(self):
        cases = (("add", "add_without_rescale", "s = Σ exp(z − m) over the values so far"),
                 ("merge", "merge_without_rescale", "merging the two halves' states gives the one-pass (m, s)"),
                 ("merge", "merge_without_early_return", "two empty states merge into the empty state"))
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "online_softmax.png")
            for name, broken, claim in cases:
                code = BROKEN.format(bench=BENCH, name=name, broken=broken, out=out)
                figure_tests.check_does_not_hold(self, code, [claim])

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "online_softmax")


if __name__ == "__main__":
    unittest.main(verbosity=2)
