#!/usr/bin/env python3
"""bench/pipeline_timeline_figure.py: its simulation of the wgmma pipeline's ring (Matplotlib; no GPU).

The defaults draw a PNG and hold every claim (exit 0). At several made-up
durations (copies slower than the wgmmas, faster, a long epilogue) the
simulated events never hold more than kStages slices in shared memory, and
one stage never holds two slices at once. A log with one copy moved before
the release it must wait for fails the check. A bad flag: exit 2, one line.
"""

import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_pipeline_timeline_figure.py", numpy=False)
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("pipeline_timeline_figure")
figure = figure_tests.load("pipeline_timeline_figure")
run = figure_tests.runner("pipeline_timeline_figure")


class PipelineTimeline(unittest.TestCase):
    def test_default_draws_and_holds(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "timeline.png")
            proc = run("--out", out)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertNotIn("DOES NOT HOLD", proc.stderr)
            self.assertIn("3 tiles x 6 slices through 4 stages", proc.stdout)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_at_most_k_stages_resident(self):
        shape = figure.read_shape()
        stages = shape["kStages"]
        for copy, wgmma, epilogue, k_tiles, tiles in ((2, 2, 6, 6, 3), (9, 1, 1, 5, 2), (0.5, 3, 20, 7, 3),
                                                      (1, 1, 1, 1, 4)):
            log = figure.simulate(shape, copy, wgmma, epilogue, k_tiles, tiles)
            spans = figure.residency(log, shape)
            self.assertEqual(len(spans), k_tiles * tiles)
            for _, _, a, b in spans:
                self.assertLess(a, b)
                # At the moment slice g's copy starts, the slices resident (copy started, not yet released by
                # both consumers) are at most kStages, g included.
                resident = sum(1 for _, _, a2, b2 in spans if a2 <= a < b2)
                self.assertLessEqual(resident, stages, (copy, wgmma, epilogue))
            for s in range(stages):  # one stage holds one slice at a time
                held = sorted((a, b) for _, st, a, b in spans if st == s)
                for (_, b1), (a2, _) in zip(held, held[1:]):
                    self.assertLessEqual(b1, a2)
            failed = [what for holds, what in figure.check(log, shape, k_tiles, tiles) if not holds]
            self.assertEqual(failed, [])

    def test_check_catches_an_early_copy(self):
        shape = figure.read_shape()
        log = figure.simulate(shape, 2, 2, 6, 6, 1)
        released = max(r["time"] for r in log["releases"] if r["slice"] == 0)
        for cp in log["copies"]:
            if cp["slice"] == shape["kStages"]:  # into stage 0 again, before slice 0 was released
                cp["start"] = released - 1
        failed = [what for holds, what in figure.check(log, shape, 6, 1) if not holds]
        self.assertTrue(any("starts only after both consumers released" in what for what in failed), failed)

    def test_bad_flag_is_one_line_exit_2(self):
        for args in (["--bogus"], ["--copy", "x"], ["--copy", "0"], ["--wgmma", "-1"], ["--k-tiles", "0"],
                     ["--tiles", "5"]):
            proc = run("--out", os.devnull, *args)
            self.assertEqual(proc.returncode, 2, args)
            self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
