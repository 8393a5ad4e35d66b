#!/usr/bin/env python3
"""bench/sharded_flow_figure.py (NumPy and Matplotlib; no GPU).

The figure is drawn to a temporary folder for P = 2 and P = 4 (exit 0, a PNG)
and its claims hold: the collectives drawn are combine.cu's, and the sharded
step's LSE, loss, dC and dE equal the unsharded ones in float64; so for the
dense step (--step dense), whose drawing fails when dense_step() no longer
sums the target logit over the shards. A target
outside a shard taken as the shard's first row (not rows(), as shard_targets
does) makes the loss claim fail (exit 1, DOES NOT HOLD). Bad flags: exit 2, one line.
"""

import os
import subprocess
import sys
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_sharded_flow_figure.py")
BENCH = figure_tests.BENCH
SCRIPT = figure_tests.script("sharded_flow_figure")
run = figure_tests.runner("sharded_flow_figure")


FIRST_ROW_TARGETS = """
import sys
sys.path.insert(0, {bench!r})
import sharded_flow_figure as figure
import numpy as np
def first_row(targets, begin, end):  # a target outside the shard taken as its first row, not rows()
    inside = (targets >= begin) & (targets < end)
    return np.where(targets == figure.IGNORE_INDEX, targets, np.where(inside, targets - begin, 0))
figure.shard_targets = first_row
sys.exit(figure.main(["--out", {out!r}]))
"""


DENSE_STEP_WITHOUT_THE_SUM = """
import pathlib, shutil, sys, tempfile
sys.path.insert(0, {bench!r})
import sharded_flow_figure as figure
copy = pathlib.Path(tempfile.mkdtemp()) / "stage"
shutil.copytree(figure.STAGE, copy)
source = copy / "sharded_vocabulary.cu"
text = source.read_text()
source.write_text(text.replace("sum_over_shards(call.reference", "(call.reference"))  # R_i left per shard
figure.STAGE = copy
sys.exit(figure.main(["--step", "dense", "--out", {out!r}]))
"""


class ShardedFlow(unittest.TestCase):
    def draw(self, gpus, *flags):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "flow.png")
            proc = run("--out", out, "--gpus", str(gpus), *flags)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertNotIn("DOES NOT HOLD", proc.stderr)
            with open(out, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        return proc.stdout

    def test_two_gpus(self):
        out = self.draw(2)
        self.assertIn("P = 2, 5 all-reduces (4N bytes, 8N bytes, 296 bytes, 16 bytes, 4·N·D bytes)", out)
        self.assertIn("shards [0, 19) [19, 37)", out)

    def test_four_gpus(self):
        self.assertIn("shards [0, 10) [10, 19) [19, 28) [28, 37)", self.draw(4))

    def test_dense_step(self):
        self.assertIn("shards [0, 19) [19, 37)", self.draw(2, "--step", "dense"))
        self.assertIn("shards [0, 10) [10, 19) [19, 28) [28, 37)", self.draw(4, "--step", "dense"))

    def test_dense_step_without_the_target_logits_sum_does_not_hold(self):
        with tempfile.TemporaryDirectory() as tmp:
            code = DENSE_STEP_WITHOUT_THE_SUM.format(bench=BENCH, out=os.path.join(tmp, "flow.png"))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: dense_step() sums the target logit", proc.stderr)

    def test_targets_outside_taken_as_first_row_do_not_hold(self):
        with tempfile.TemporaryDirectory() as tmp:
            code = FIRST_ROW_TARGETS.format(bench=BENCH, out=os.path.join(tmp, "flow.png"))
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: the loss from the joined sums is the unsharded loss", proc.stderr)

    def test_bad_flags_are_one_line_exit_2(self):
        figure_tests.check_bad_flags(self, run, "sharded_flow", seeded=False,
                                     extra=(["--gpus", "3"], ["--gpus", "x"], ["--step", "sparse"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
