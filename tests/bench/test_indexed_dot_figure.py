#!/usr/bin/env python3
"""bench/indexed_dot_figure.py (Matplotlib and NumPy; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG); the grid rule and
the load width give the numbers of stage 04's code; a kernel that drops one D
slice makes the script's claims fail (exit 1, DOES NOT HOLD). Bad flags:
exit 2, one line.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_indexed_dot_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("indexed_dot_figure")
figure = figure_tests.load("indexed_dot_figure")
run = figure_tests.runner("indexed_dot_figure")


BROKEN = """
import sys
sys.path.insert(0, {bench!r})
import indexed_dot_figure as figure
original = figure.block_slices
def drop_last_slice(y, grid_y, d):
    last = (d - 1) // figure.SLICE_D * figure.SLICE_D
    return [begin for begin in original(y, grid_y, d) if begin != last]
figure.block_slices = drop_last_slice
sys.exit(figure.main(["--out", {out!r}]))
"""


class IndexedDot(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "indexed_dot", ["grid 2 x 4"])

    def test_rules_by_hand(self):
        self.assertEqual(figure.plan_grid(16, 1000), (2, 4))
        self.assertEqual(figure.plan_grid(17, 256), (3, 1))
        self.assertEqual(figure.plan_grid(1, 256 * 70000), (1, 65535))
        self.assertEqual(figure.block_slices(1, 4, 1000), [256])
        self.assertEqual(figure.block_slices(0, 65535, 256 * 65536), [0, 256 * 65535])
        self.assertEqual((figure.widest_load(1000, 2), figure.widest_load(100, 2), figure.widest_load(99, 4)),
                         (8, 4, 1))

    def test_dropped_slice_does_not_hold(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "indexed_dot.png")
            code = BROKEN.format(bench=BENCH, out=out)
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: ", proc.stderr)
            self.assertIn("the slice partials of each token sum to C_t·E_i", proc.stderr)
            self.assertIn("exactly one (block, warp)", proc.stderr)

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "indexed_dot", seeded=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
