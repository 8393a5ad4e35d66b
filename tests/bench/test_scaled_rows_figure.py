#!/usr/bin/env python3
"""bench/scaled_rows_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) at several seeds; the bf16 rounding gives the values
worked out by hand; a plan that scales the rows without exp(R − LSE), leaves out the target's terms S_it, never
runs a far row
again, or truncates q to bf16 instead of rounding it makes the script's claims fail (exit 1, DOES NOT HOLD). Bad
flags: exit 2, one line.
"""

import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_scaled_rows_figure.py")
BENCH = figure_tests.BENCH
figure = figure_tests.load("scaled_rows_figure")
run = figure_tests.runner("scaled_rows_figure")


BROKEN = """
import sys
import numpy as np
sys.path.insert(0, {bench!r})
import scaled_rows_figure as figure
plan = figure.plan
def alpha_without_lse(e, c, targets, rounded=True):
    r = plan(e, c, targets, rounded)
    r["alpha"] = r["g"].copy()
    return r
def target_terms_lost(e, c, targets, rounded=True):
    r = plan(e, c, targets, rounded)
    r["de"] = r["alpha"][:, None] * (r["q"] @ c)
    r["dc"] = r["q"].T @ (r["alpha"][:, None] * e)
    return r
def truncated(x):
    bits = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFF0000)
    return bits.view(np.float32).astype(np.float64)
{setup}
sys.exit(figure.main(["--out", {out!r}]))
"""


class ScaledRows(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "scaled_rows", ["rows run again 1"], seeds=("3", "0", "11"))

    def test_bf16_by_hand(self):
        values = [1.0, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -7 + 2.0 ** -9, -2.5, 0.0]
        # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1); 1 + 3·2^-8 halfway to even (1 + 2^-6).
        expected = [1.0, 1.0, 1.0 + 2.0 ** -6, 1.0 + 2.0 ** -7, -2.5, 0.0]
        self.assertEqual(list(figure.to_bf16(values)), expected)

    def test_broken_plans_do_not_hold(self):
        cases = (("figure.plan = alpha_without_lse", "α_i·q_ij = S_ij"),
                 ("figure.plan = target_terms_lost", "dE's rows = α ∘ (Q·C) + S_it·C_t equal S·C"),
                 ("figure.MOST_REFERENCE_GAP = 60.0", "is the one row run again with R = LSE"),
                 ("figure.to_bf16 = truncated", "moves each S_ij off the target by at most 2^-8"))
        with tempfile.TemporaryDirectory() as tmp:
            for setup, claim in cases:
                code = BROKEN.format(bench=BENCH, setup=setup, out=os.path.join(tmp, "scaled_rows.png"))
                figure_tests.check_does_not_hold(self, code, [claim])

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "scaled_rows")


if __name__ == "__main__":
    unittest.main(verbosity=2)
