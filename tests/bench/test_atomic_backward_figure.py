#!/usr/bin/env python3
"""bench/atomic_backward_figure.py (NumPy and Matplotlib; no GPU).

The figure is drawn to a temporary folder (exit 0, a PNG) and its claims
hold: the tiles' partials, summed in a random order, are the dense dE and dC
in float64, and each accumulator row receives one partial per block of the
other side. A tile order that leaves one tile out makes them fail (exit 1,
DOES NOT HOLD). Bad flags: exit 2, one line.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_atomic_backward_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("atomic_backward_figure")
figure = figure_tests.load("atomic_backward_figure")
run = figure_tests.runner("atomic_backward_figure")


ONE_TILE_MISSING = """
import sys
sys.path.insert(0, {bench!r})
import atomic_backward_figure as figure
every_tile = figure.tile_order
figure.tile_order = lambda *args: every_tile(*args)[1:]  # the first tile's partials never added
sys.exit(figure.main(["--out", {out!r}]))
"""


class AtomicBackward(unittest.TestCase):
    def test_draws_and_holds(self):
        figure_tests.check_draws(self, run, "atomic_backward", ["4 token blocks × 6 vocabulary blocks",
                                                               "2359296 bytes per tile × 128000 tiles = 302.0 GB"])

    def test_traffic_is_the_worklog_formula(self):
        n, d, v = figure.GEMMA2
        per_tile, tiles, total = figure.traffic(n, d, v)
        self.assertEqual(per_tile, 2 * 128 * d * 4)
        self.assertEqual(tiles, 64 * 2000)
        self.assertEqual(total, 8 * n * v * d // 128)

    def test_one_tile_missing_does_not_hold(self):
        with tempfile.TemporaryDirectory() as tmp:
            code = ONE_TILE_MISSING.format(bench=BENCH, out=os.path.join(tmp, "atomic.png"))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: the tiles' S·C partials sum to the dense S_full·C", proc.stderr)
            self.assertIn("DOES NOT HOLD: each dE_acc row receives one partial per vocabulary block", proc.stderr)

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "atomic_backward", seeded=False)


if __name__ == "__main__":
    unittest.main(verbosity=2)
