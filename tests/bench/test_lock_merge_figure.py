#!/usr/bin/env python3
"""bench/lock_merge_figure.py (NumPy and Matplotlib; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) and its claims
hold; log_add_exp gives the numbers worked out by hand. A protocol that
releases the lock before the merge, or a lock that never refuses, lets two
units' merges overlap: the claims fail (exit 1, DOES NOT HOLD). Bad flags:
exit 2, one line.
"""

import math
import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_lock_merge_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("lock_merge_figure")
figure = figure_tests.load("lock_merge_figure")
run = figure_tests.runner("lock_merge_figure")


BROKEN = """
import sys
sys.path.insert(0, {bench!r})
import lock_merge_figure as figure
{patch}
sys.exit(figure.main(["--out", {out!r}]))
"""


class LockMerge(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "lock_merge", ["2 token blocks × 5 ranges"], seeds=("5", "0", "11"))

    def test_log_add_exp_by_hand(self):
        self.assertEqual(figure.log_add_exp(-math.inf, 2.5), 2.5)        # the first merge: the partial itself
        self.assertEqual(figure.log_add_exp(-math.inf, -math.inf), -math.inf)  # no NaN
        self.assertAlmostEqual(figure.log_add_exp(1.0, 3.0), math.log(math.e + math.exp(3.0)), places=14)
        self.assertEqual(figure.log_add_exp(1.0, 3.0), figure.log_add_exp(3.0, 1.0))

    def test_the_code_order(self):
        self.assertEqual(figure.PROTOCOL, ("cas", "fence", "sync", "read", "write", "sync", "fence", "exch"))
        self.assertTrue(figure.protocol_in_code())

    def test_broken_protocols_do_not_hold(self):
        cases = (
            # the lock released right after it is taken, before the merge
            'figure.PROTOCOL = ("cas", "exch", "fence", "sync", "read", "write", "sync", "fence")',
            # a lock that never refuses
            "figure.try_lock = lambda memory, lock: 0",
        )
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "lock_merge.png")
            for patch in cases:
                figure_tests.check_does_not_hold(self, BROKEN.format(bench=BENCH, patch=patch, out=out), [
                    "at most one unit holds a token block's lock at any time", "every unit merges exactly once",
                    "in the simulated order, gives each row's log Σ exp(z)"])

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "lock_merge")


if __name__ == "__main__":
    unittest.main(verbosity=2)
