#!/usr/bin/env python3
"""bench/forward_units_figure.py at its made-up shapes (NumPy and Matplotlib; no GPU).

The default shape (N = 512, V = 2500, S = 3, 5 SMs) draws a PNG and holds its
claims (exit 0); the plan it prints is plan_tile_units' for those sizes: 10
tiles in 3 ranges of 4, and 7 ranges asked of 10 tiles give 5 ranges of 2 (no
range is empty). A bad flag: exit 2 with one line.
"""

import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_forward_units_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("forward_units_figure")
run = figure_tests.runner("forward_units_figure")


class ForwardUnits(unittest.TestCase):
    def draw(self, *args):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "units.png")
            proc = run("--out", out, *args)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("DOES NOT HOLD", proc.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        return proc.stdout

    def test_default_shape(self):
        self.assertIn("4 token blocks x 3 ranges of 4 tiles (10 tiles), token group 4, 12 units on 5 blocks",
                      self.draw())

    def test_no_empty_range(self):
        self.assertIn("4 token blocks x 5 ranges of 2 tiles", self.draw("--ranges", "7"))

    def test_bad_flag_is_one_line_exit_2(self):
        for args in (["--bogus"], ["--ranges", "x"], ["--n", "0"], ["--sms", "10"]):
            proc = run("--out", os.devnull, *args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
