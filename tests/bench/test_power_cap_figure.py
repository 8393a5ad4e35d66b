#!/usr/bin/env python3
"""bench/power_cap_figure.py (Matplotlib; no GPU).

The figure is drawn from the committed logs of session 28 (exit 0, a PNG, the numbers read back); the claims are
checked on hand-made samples and probes: a sample at the cap without the power-cap reason, a clock that does not
fall, a back-to-back run no slower than the idle-between one each fail (exit 1, DOES NOT HOLD). Bad flags and files
that are not the logs it reads: exit 2, one line.
"""

import json
import os
import tempfile
import unittest

import figure_tests  # tests/bench/figure_tests.py

figure_tests.need_plotting("test_power_cap_figure.py", numpy=False)
BENCH = figure_tests.BENCH
figure = figure_tests.load("power_cap_figure")
run = figure_tests.runner("power_cap_figure")

HEADER = ("timestamp, clocks.current.sm [MHz], power.draw [W], temperature.gpu, "
          "clocks_event_reasons.active\n")


def smi_text(samples):
    return HEADER + "".join(f"2026/11/29 11:54:{i % 60:02d}.000, {mhz} MHz, {w} W, 50, 0x{reasons:016x}\n"
                            for i, (mhz, w, reasons) in enumerate(samples))


def probe(back, idle, again):
    runs = {"back_to_back": back, "idle_10ms_between": idle, "back_to_back_again": again}
    return {"shapes": {"made_up": {run: {"gpu_ms_median": ms, "gpu_ms_min": ms - 0.1, "gpu_ms_max": ms + 0.2,
                                         "host_ms_median": 1.0} for run, ms in runs.items()}}}


CAPPED = [(1470, 690.0, 0x4), (1500, 700.0, 0x4), (1980, 120.0, 0x0), (1980, 150.0, 0x0), (345, 80.0, 0x1)]


class PowerCap(unittest.TestCase):
    def test_draws_the_committed_logs(self):
        figure_tests.check_draws(self, run, "power_cap", ["1121 samples, 157 at 650 W or more",
                                                          "lm128k_flat 19.49 ms back to back, 17.26 with idle"])

    def test_claims_on_made_up_logs(self):
        good = figure.claims(CAPPED, probe(10.5, 10.0, 10.4)["shapes"])
        self.assertEqual([what for holds, what in good if not holds], [])
        cases = (([(1470, 690.0, 0x0)] + CAPPED[1:], probe(10.5, 10.0, 10.4), "has the power-cap reason"),
                 ([(1900, 690.0, 0x4), (1950, 700.0, 0x4)] + CAPPED[2:], probe(10.5, 10.0, 10.4),
                  "median SM clock at 650 W or more"),
                 (CAPPED, probe(10.1, 10.0, 10.4), "back_to_back's median"),
                 (CAPPED, probe(10.5, 10.0, 10.2), "back_to_back_again's median"))
        for samples, made, claim in cases:
            failed = [what for holds, what in figure.claims(samples, made["shapes"]) if not holds]
            self.assertEqual(len(failed), 1, (claim, failed))
            self.assertIn(claim, failed[0])

    def test_a_failing_claim_exits_1(self):
        with tempfile.TemporaryDirectory() as tmp:
            smi, made = os.path.join(tmp, "smi.csv"), os.path.join(tmp, "probe.json")
            with open(smi, "w") as f:
                f.write(smi_text(CAPPED))
            with open(made, "w") as f:
                json.dump(probe(10.0, 10.0, 10.0), f)
            proc = run("--smi", smi, "--probe", made, "--out", os.path.join(tmp, "power_cap.png"))
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn("DOES NOT HOLD: made_up: back_to_back's median", proc.stderr)

    def test_bad_flags_and_files(self):
        with tempfile.TemporaryDirectory() as inputs:
            not_csv, not_probe = os.path.join(inputs, "x.csv"), os.path.join(inputs, "x.json")
            bad_line = os.path.join(inputs, "bad_line.csv")
            with open(not_csv, "w") as f:
                f.write("a,b\n1,2\n")
            with open(bad_line, "w") as f:
                f.write(HEADER + "2026/11/29, fast, 690 W, 50, 0x4\n")
            with open(not_probe, "w") as f:
                json.dump({"shapes": {"s": {"back_to_back": {}}}}, f)
            no_shapes = os.path.join(inputs, "no_shapes.json")
            with open(no_shapes, "w") as f:
                json.dump({"shapes": {}}, f)
            figure_tests.check_bad_flags(self, run, "power_cap", seeded=False, extra=(
                ["--smi", os.path.join(inputs, "missing.csv")], ["--smi", not_csv], ["--smi", bad_line],
                ["--probe", os.path.join(inputs, "missing.json")], ["--probe", not_probe], ["--probe", no_shapes]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
