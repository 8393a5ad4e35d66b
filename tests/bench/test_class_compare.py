#!/usr/bin/env python3
"""cpu.bench.class_compare: bench/class_compare.py on made-up benchmark files.

Asserts the page's verdicts (a case beyond the larger spread is slower or faster, one inside it within, one with
no spread '?'), the class cases ours lacks, the sm_80 column on a compute capability 8.x GPU only, the files'
names from the GPU and the commit, the GPU tests' summary line, and exit status 2 with one line on a malformed
file. Python 3 standard library only (the figure is drawn only where matplotlib is).
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "class_compare.py"
spec = importlib.util.spec_from_file_location("class_compare", SCRIPT)
class_compare = importlib.util.module_from_spec(spec)
spec.loader.exec_module(class_compare)


def case(name, median, low=None, high=None, sd=None):
    """Google Benchmark aggregates of one case, in ms."""
    run = f"{name}/iterations:10/repeats:5/manual_time"
    out = [{"name": run + "_median", "run_name": run, "run_type": "aggregate", "aggregate_name": "median",
            "real_time": median, "time_unit": "ms", "peak_MB": 10.0}]
    for aggregate, value in (("min", low), ("max", high), ("stddev", sd)):
        if value is not None:
            out.append({"name": f"{run}_{aggregate}", "run_name": run, "run_type": "aggregate",
                        "aggregate_name": aggregate, "real_time": value, "time_unit": "ms"})
    return out


def document(gpu, capability, cases, date="2026-12-01T10:00:00+00:00"):
    return {"context": {"date": date, "gpu_name": gpu, "gpu_compute_capability": capability, "gpu_sm_count": "108",
                        "cce_commit": "abc1234 (clean)"},
            "benchmarks": [entry for c in cases for entry in c]}


OURS = document("NVIDIA H100 80GB HBM3", "9.0", [
    case("cublas_floor/loss/gemma2", 10.0, 9.9, 10.1),
    case("stage10_plan_per_batch/loss_grad/gemma2", 20.0, 19.0, 21.0),
    case("stage05_lse_locks/loss/gemma2", 14.0, sd=0.5),
    case("stage03_fused_gemm_ce/loss/gemma2", 13.0),
], date="2026-11-25T04:00:00+00:00")
SM80 = document("NVIDIA H100 80GB HBM3", "9.0", [case("stage05_lse_locks/loss/gemma2", 30.0, 29.0, 31.0)])


class ClassCompareTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.root = Path(self.dir.name)
        for name, doc in (("ours.json", OURS), ("sm80.json", SM80)):
            (self.root / name).write_text(json.dumps(doc))
        (self.root / "ctest.log").write_text("...\n100% tests passed, 0 tests failed out of 506\n")

    def run_script(self, doc, *extra):
        path = self.root / "class.json"
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return subprocess.run([sys.executable, str(SCRIPT), str(path), "--out-dir", str(self.root / "out"),
                               "--ours", str(self.root / "ours.json"), "--sm80", str(self.root / "sm80.json"), *extra],
                              capture_output=True, text=True)

    def test_slug(self):
        self.assertEqual(class_compare.gpu_slug("NVIDIA A100-SXM4-80GB"), "a100_sxm4_80gb")
        self.assertEqual(class_compare.gpu_slug("NVIDIA GeForce RTX 4090"), "geforce_rtx_4090")

    def test_page(self):
        doc = document("NVIDIA A100-SXM4-80GB", "8.0", [
            case("cublas_floor/loss/gemma2", 10.05, 9.95, 10.2),             # inside the spread: within
            case("stage10_plan_per_batch/loss_grad/gemma2", 30.0, 29.5, 30.5),  # 10 ms > 2 ms: slower
            case("stage05_lse_locks/loss/gemma2", 12.0, 11.9, 12.1),          # 2 ms > 2 sd = 1 ms: faster
            case("stage03_fused_gemm_ce/loss/gemma2", 26.0),                  # no spread either side: ?
            case("stage06_fused_backward/loss_grad/gemma2", 5.0, 4.9, 5.1),   # not in ours
        ])
        result = self.run_script(doc, "--ctest-log", str(self.root / "ctest.log"))
        self.assertEqual(result.returncode, 0, result.stderr)
        out = self.root / "out"
        self.assertTrue((out / "bench_a100_sxm4_80gb_abc1234.json").is_file())
        page = (out / "results_a100_sxm4_80gb.md").read_text()
        self.assertIn("# Results on NVIDIA A100-SXM4-80GB: the class's run", page)
        self.assertIn("set beside ours (NVIDIA H100 80GB HBM3", page)
        self.assertIn("`100% tests passed, 0 tests failed out of 506` (`ctest.log`)", page)
        self.assertIn("| cublas_floor | loss | 10.05 (9.950–10.20) | 10.00 (9.900–10.10) | 1.01 | within | – |", page)
        self.assertIn("| stage10_plan_per_batch | loss_grad | 30.00 (29.50–30.50) | 20.00 (19.00–21.00) | 1.50 | "
                      "**slower** | – |", page)
        self.assertIn("| stage05_lse_locks | loss | 12.00 (11.90–12.10) | 14.00 | 0.86 | **faster** | "
                      "30.00 (29.00–31.00) |", page)
        self.assertIn("| stage03_fused_gemm_ce | loss | 26.00 | 13.00 | 2.00 | ? | – |", page)
        self.assertIn("**2 of 4 cases** differ from ours by more than the spread (1 slower, 1 faster)", page)
        self.assertIn("not compared): stage06_fused_backward/loss_grad/gemma2.", page)
        figure = out / "figures" / "class_a100_sxm4_80gb.png"
        self.assertTrue(figure.is_file() or "(No figure: matplotlib is missing" in page)

    def test_no_sm80_column_on_hopper(self):
        doc = document("NVIDIA H200", "9.0", [case("stage05_lse_locks/loss/gemma2", 14.0, 13.9, 14.1)])
        result = self.run_script(doc)
        self.assertEqual(result.returncode, 0, result.stderr)
        page = (self.root / "out" / "results_h200.md").read_text()
        self.assertNotIn("sm_80 paths", page)
        self.assertIn("**GPU tests:** not run with this page", page)

    def test_which_tests_ran(self):
        doc = document("NVIDIA H200", "9.0", [case("stage05_lse_locks/loss/gemma2", 14.0, 13.9, 14.1)])
        result = self.run_script(doc, "--ctest-log", str(self.root / "ctest.log"), "--ctest-what",
                                 "the stages' own checks")
        self.assertEqual(result.returncode, 0, result.stderr)
        page = (self.root / "out" / "results_h200.md").read_text()
        self.assertIn("**GPU tests:** the stages' own checks: `100% tests passed, 0 tests failed out of 506` "
                      "(`ctest.log`).", page)
        self.assertIn("| stage05_lse_locks | loss | 14.00 (13.90–14.10) | 14.00 | 1.00 | within |\n", page)

    def test_malformed_file(self):
        result = self.run_script("{not json")
        self.assertEqual(result.returncode, 2)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1)
        self.assertIn("not valid JSON", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
