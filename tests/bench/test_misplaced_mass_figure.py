#!/usr/bin/env python3
"""bench/misplaced_mass_figure.py (Matplotlib; no GPU).

The figure is drawn from session 52's committed emulation (exit 0, a PNG, R's choice per shape read back); the claims
are checked on made-up shapes: a misplaced mass above the dropped one, R's choice over eager's error, and no shape
where the dropped mass's choice is over each fail (exit 1, DOES NOT HOLD). Bad flags and files that are not
emulate_drop.py's JSON: exit 2, one line.
"""

import json
import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_misplaced_mass_figure.py", numpy=False)
figure = figure_tests.load("misplaced_mass_figure")
run = figure_tests.runner("misplaced_mass_figure")
BUDGET, LAST = figure.stage_rule()


def made_up(r, d, errors, eager=(1.0, 1.0)):
    """A shape: per exponent 8.. the misplaced mass r[k], the dropped mass d[k] and (dE, dC) errors[k]."""
    rows = [{"eps_exponent": 8 + k, "residual_bound_per_row": r[k], "dropped_mass_per_row": d[k],
             "bf16_dE": errors[k][0], "bf16_dC": errors[k][1]} for k in range(len(r))]
    return {"eager": {"dE": eager[0], "dC": eager[1]}, "eps": rows}


def shapes_of(data):
    return figure.read_emulated_data(data)


N = LAST - 8 + 1
# Peaked: R falls below the budget at 2^-11, where the errors reach eager's; D only at 2^-14.
PEAKED = made_up([0.05, 0.04, 0.03, 0.02] + [0.01] * (N - 4), [0.08, 0.06, 0.05, 0.04, 0.03, 0.028] + [0.02] * (N - 6),
                 [(2.0, 2.0)] * 3 + [(0.9, 0.9)] * (N - 3))
# Flat: nothing within either budget; over eager's at 2^-16, under at 2^-17.
FLAT = made_up([0.1] * (N - 1) + [0.05], [0.3] * N, [(2.0, 2.0)] * (N - 1) + [(0.9, 0.9)])


class MisplacedMass(unittest.TestCase):
    def test_draws_the_committed_emulation(self):
        figure_tests.check_draws(self, run, "misplaced_mass", [f"budget {BUDGET:g}", "lm128k 2^-13",
                                                               "lm128k_s30 2^-17", "gemma2 2^-8"])

    def test_claims_on_made_up_shapes(self):
        good = figure.claims(shapes_of({"shapes": {"peaked": PEAKED, "flat": FLAT}}), BUDGET, LAST)
        self.assertEqual([what for holds, what in good if not holds], [])
        above = json.loads(json.dumps(PEAKED))
        above["eps"][5]["residual_bound_per_row"] = 0.5
        late = json.loads(json.dumps(PEAKED))
        late["eps"][3]["bf16_dC"] = 1.5
        cases = (({"peaked": above, "flat": FLAT}, "peaked: R ≤ D"),
                 ({"peaked": late, "flat": FLAT}, "peaked: dE and dC at R's choice"),
                 ({"peaked": PEAKED}, "at some shape the dropped mass's choice"))
        for shapes, claim in cases:
            failed = [what for holds, what in figure.claims(shapes_of({"shapes": shapes}), BUDGET, LAST) if not holds]
            self.assertTrue(failed, claim)
            self.assertTrue(any(claim in what for what in failed), (claim, failed))

    def test_a_failing_claim_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "peaked.json")
            with open(path, "w") as f:
                json.dump({"shapes": {"peaked": PEAKED}}, f)
            proc = run("--emulated", path, "--out", os.path.join(tmp, "misplaced_mass.png"))
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: at some shape the dropped mass's choice", proc.stderr)

    def test_bad_flags_and_files(self):
        with tempfile.TemporaryDirectory() as inputs:
            not_json, no_shapes = os.path.join(inputs, "x.json"), os.path.join(inputs, "y.json")
            with open(not_json, "w") as f:
                f.write("{ nope")
            with open(no_shapes, "w") as f:
                json.dump({"context": {}}, f)
            figure_tests.check_bad_flags(self, run, "misplaced_mass", seeded=False, extra=[
                ["--emulated", os.path.join(inputs, "missing.json")], ["--emulated", not_json],
                ["--emulated", no_shapes], ["--emulated"]])


if __name__ == "__main__":
    unittest.main()
