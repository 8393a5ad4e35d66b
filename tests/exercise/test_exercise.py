#!/usr/bin/env python3
"""cpu.exercise.generator: scripts/exercise.py on a stage tree made up here.

Asserts what --write makes of marked blocks (the stub, `return` where the
block returns a value, the markers and everything else kept), that --check
passes a fresh exercise and one whose blocks are written, and fails, naming
the file, an exercise changed outside its blocks, a missing exercise, a
stage without one, and malformed markers. Python 3 standard library only.
"""

import contextlib
import importlib.util
import io
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "exercise.py"
spec = importlib.util.spec_from_file_location("exercise", SCRIPT)
exercise = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exercise)

SOLUTION = """\
#include "x.h"
__device__ float f(float x) {
  // EXERCISE(the value): return twice x
  const float y = 2 * x;
  return y;
  // END EXERCISE
}
__device__ void g(float* out) {
  // EXERCISE(the store): write 1
  *out = 1;
  // END EXERCISE
}
"""


class Tree:
    """stages/01_a .. 10_a, each with a marked k.cu and exercise/README.md, under a temporary root."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        for number in exercise.EXERCISE_STAGES:
            folder = self.root / "stages" / f"{number:02d}_a"
            (folder / "exercise").mkdir(parents=True)
            (folder / "k.cu").write_text(SOLUTION)
            (folder / "exercise" / "README.md").write_text("task\n")
        self.saved = exercise.ROOT, exercise.STAGES
        exercise.ROOT, exercise.STAGES = self.root, self.root / "stages"

    def close(self):
        exercise.ROOT, exercise.STAGES = self.saved
        self.dir.cleanup()

    def run(self, function, *args):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = function(*args)
        return code, out.getvalue(), err.getvalue()


class ExerciseTest(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.close)
        self.exercise_file = self.tree.root / "stages" / "03_a" / "exercise" / "k.cu"

    def test_write_makes_stubs_and_keeps_the_rest(self):
        self.assertEqual(self.tree.run(exercise.write, False)[0], 0)
        text = self.exercise_file.read_text()
        self.assertIn('#include "common/exercise.h"\n', text)
        self.assertIn('  // EXERCISE(the value): return twice x\n'
                      '  return CCE_EXERCISE_MISSING("03_a", "the value");\n'
                      '  // END EXERCISE\n', text)
        self.assertIn('  // EXERCISE(the store): write 1\n'
                      '  CCE_EXERCISE_MISSING("03_a", "the store");\n'
                      '  // END EXERCISE\n', text)
        self.assertNotIn("2 * x", text)
        self.assertTrue(text.endswith(SOLUTION[SOLUTION.index("  // END EXERCISE\n}\n__device__ void"):]
                                      .replace("  *out = 1;\n", '  CCE_EXERCISE_MISSING("03_a", "the store");\n')))

    def test_solved_keeps_the_solution(self):
        self.tree.run(exercise.write, True)
        self.assertTrue(self.exercise_file.read_text().endswith(SOLUTION))

    def test_check_passes_blank_and_written_exercises(self):
        self.tree.run(exercise.write, False)
        code, out, err = self.tree.run(exercise.check)
        self.assertEqual(code, 0, err)
        self.assertIn("stages/03_a/exercise/k.cu: the value: blank", out)
        text = self.exercise_file.read_text().replace('  return CCE_EXERCISE_MISSING("03_a", "the value");\n',
                                                      "  return x + x;\n")
        self.exercise_file.write_text(text)
        code, out, err = self.tree.run(exercise.check)
        self.assertEqual(code, 0, err)
        self.assertIn("stages/03_a/exercise/k.cu: the value: written", out)

    def test_check_fails_on_drift_outside_the_blocks(self):
        self.tree.run(exercise.write, False)
        solution = self.tree.root / "stages" / "03_a" / "k.cu"
        solution.write_text(SOLUTION.replace("__device__ void g(float* out)", "__device__ void g(float* out, int n)"))
        code, _, err = self.tree.run(exercise.check)
        self.assertEqual(code, 1)
        self.assertIn("stages/03_a/exercise/k.cu differs from its solution outside the EXERCISE blocks", err)
        self.assertIn("+__device__ void g(float* out) {", err)

    def test_check_fails_on_a_changed_marker(self):
        self.tree.run(exercise.write, False)
        self.exercise_file.write_text(self.exercise_file.read_text().replace("write 1", "write 2"))
        code, _, err = self.tree.run(exercise.check)
        self.assertEqual(code, 1)
        self.assertIn("03_a/exercise/k.cu differs", err)

    def test_check_fails_on_missing_pieces(self):
        self.tree.run(exercise.write, False)
        self.exercise_file.unlink()
        (self.tree.root / "stages" / "05_a" / "exercise" / "README.md").unlink()
        (self.tree.root / "stages" / "07_a" / "k.cu").write_text("int x;\n")
        code, _, err = self.tree.run(exercise.check)
        self.assertEqual(code, 1)
        self.assertIn("stages/03_a/exercise/k.cu is missing", err)
        self.assertIn("stages/05_a/exercise/README.md is missing", err)
        self.assertIn("stages/07_a: no source file has an EXERCISE block", err)
        self.assertIn("stages/07_a/exercise/k.cu: no file of its stage has EXERCISE blocks", err)

    def test_malformed_markers(self):
        for text, message in [
            ("// EXERCISE(a): b\nx\n", "EXERCISE without its END EXERCISE"),
            ("x\n// END EXERCISE\n", "END EXERCISE without its EXERCISE"),
            ("// EXERCISE(a): b\n// EXERCISE(c): d\n// END EXERCISE\n", "EXERCISE inside the block"),
            ("// EXERCISE(a)\n// END EXERCISE\n", "malformed marker"),
        ]:
            with self.assertRaises(exercise.Error) as caught:
                exercise.split_blocks(text, "f.cu")
            self.assertIn(message, str(caught.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
