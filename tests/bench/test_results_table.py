#!/usr/bin/env python3
"""CPU test of bench/results_table.py on fixture.json (Google Benchmark JSON as
cce_bench writes it: aggregates only, an errored case, a trained-model shape
(lm32k) with stage 07's kept_frac, plus one peer entry without run_name and
with a time in us). Standard library only.

    python3 tests/bench/test_results_table.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "results_table.py")
FIXTURE = os.path.join(HERE, "fixture.json")
RESULTS_MD = os.path.join(ROOT, "docs", "results.md")

ROWS_SMALL = [
    "| cublas_floor | 0.412 | 262.1 | 1.650 | 428.5 | 1.00 | 1.00 | – | – |",
    "| stage01_materialized | 1.234 | 524.3 | 3.456 | 690.0 | 2.99 | 2.09 | 3.10e-03 | 2.70e-03 |",
    "| stage03_fused_gemm_ce | 0.789 | 0.54 | – | – | 1.92 | – | – | – |",
    "| peer_cce | 0.950 | 1.20 | – | – | 2.31 | – | – | – |",
]
ROWS_GEMMA2 = [
    "| cublas_floor | 13.90 | 4194 | – | – | 1.00 | – | – | – |",
    "| stage01_materialized | – | – | skipped | – | – | – | – | – |",
]
# The trained-model shape: its size from the context's cce_shapes, and a kept-tiles column (stage 07 has it).
ROWS_LM32K = [
    "### lm32k (trained model, bench/lm_data.py: N=8192, D=768, V=32000)",
    "| implementation | loss ms | loss MB | loss+grad ms | loss+grad MB | × floor (loss) | × floor (loss+grad) "
    "| dE err | dC err | kept tiles |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    "| cublas_floor | – | – | 2.500 | 600.0 | – | 1.00 | – | – | – |",
    "| stage06_fused_backward | – | – | 9.000 | 80.5 | – | 3.60 | 3.10e-03 | 4.20e-03 | – |",
    "| stage07_filter_sort | – | – | 4.000 | 80.9 | – | 1.60 | 3.50e-03 | 4.70e-03 | 7.1% |",
]


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, encoding="utf-8")


class ResultsTable(unittest.TestCase):
    def assert_in_order(self, text, lines):
        pos = -1
        for line in lines:
            found = text.find(line, pos + 1)
            self.assertGreater(found, pos, f"missing or out of order: {line}\n--- output:\n{text}")
            pos = found

    def assert_one_line_error(self, proc, fragment):
        self.assertNotEqual(proc.returncode, 0)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn("results_table.py: error:", lines[0])
        self.assertIn(fragment, lines[0])

    def test_tables_from_median_aggregates(self):
        proc = run(FIXTURE)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout
        self.assert_in_order(out, ["GPU **NVIDIA H100 80GB HBM3**", "commit `0123456789ab`",
                                   "### small (N=4096, D=2304, V=32000)", "| implementation | loss ms |",
                                   *ROWS_SMALL, "### gemma2 (N=8192, D=2304, V=256000)", *ROWS_GEMMA2,
                                   "`stage01_materialized` loss+grad: skipped: needs 26000.0 MB, the GPU has "
                                   "15000.0 MB free", *ROWS_LM32K])
        self.assertNotIn("load_avg", out)  # the host CPU's context stays out
        # Only the table with a kept_frac has the column.
        self.assertEqual(out.count("kept tiles |"), 1, out)

    def test_update_replaces_only_the_marked_block(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "results.md")
            before, after = "# Results\n\nintro\n\n", "\n\n## Reproduce\n\nrun it\n"
            with open(md, "w", encoding="utf-8") as f:
                f.write(before + "<!-- results:begin -->\n(no run recorded yet)\n<!-- results:end -->" + after)
            proc = run(FIXTURE, "--update", md)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout, "")
            text = open(md, encoding="utf-8").read()
            self.assertTrue(text.startswith(before + "<!-- results:begin -->\n"))
            self.assertTrue(text.endswith("<!-- results:end -->" + after))
            self.assertNotIn("(no run recorded yet)", text)
            self.assert_in_order(text, ROWS_SMALL + ROWS_GEMMA2)
            # Idempotent: a second update gives the same file.
            self.assertEqual(run(FIXTURE, "--update", md).returncode, 0)
            self.assertEqual(open(md, encoding="utf-8").read(), text)

    def test_update_of_the_repository_skeleton(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "results.md")
            with open(RESULTS_MD, encoding="utf-8") as f:
                original = f.read()
            with open(md, "w", encoding="utf-8") as f:
                f.write(original)
            proc = run(FIXTURE, "--update", md)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(open(md, encoding="utf-8").read(), ROWS_SMALL)

    def test_later_file_wins_for_the_same_benchmark(self):
        with tempfile.TemporaryDirectory() as tmp:
            peers = os.path.join(tmp, "peers.json")
            with open(peers, "w", encoding="utf-8") as f:
                # As bench/peers.py writes it: "gpu", "commit", and the skipped cases in the context.
                json.dump({"context": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2025-03-05", "commit": "fedcba987654",
                                       "torch": "2.5.1",
                                       "skipped": [{"impl": "peer_torch_compile", "reason": "no torch.compile"},
                                                   {"run_name": "peer_cce/loss_grad/small",
                                                    "reason": "out of memory"}]},
                           "benchmarks": [{"name": "peer_liger/loss_grad/small", "run_name": "peer_liger/loss_grad/small",
                                           "run_type": "aggregate", "aggregate_name": "median", "real_time": 0.002,
                                           "time_unit": "s", "peak_MB": 12.0, "dE_rel_err": 4e-3},
                                          {"name": "peer_cce/loss/small", "run_type": "aggregate",
                                           "aggregate_name": "median", "real_time": 0.8, "time_unit": "ms"}]}, f)
            proc = run(FIXTURE, peers)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["`fixture.json`",
                                               "`peers.json`: GPU **NVIDIA H100 80GB HBM3**, date 2025-03-05, "
                                               "commit `fedcba987654`", "  - torch: 2.5.1",
                                               "  - skipped: `peer_torch_compile`: no torch.compile",
                                               "| peer_cce | 0.800 | – | skipped | – | – | – | – | – |",
                                               "| peer_liger | – | – | 2.000 | 12.0 | – | – | 4.00e-03 | – |",
                                               "- `peer_cce` loss+grad: skipped: out of memory"])
            self.assertNotIn("different GPUs", proc.stdout)
            self.assertIn("peer_cce/loss/small", proc.stderr)

    def test_lm_shape_without_size_and_skipped_shapes(self):
        with tempfile.TemporaryDirectory() as tmp:
            peers = os.path.join(tmp, "peers.json")
            with open(peers, "w", encoding="utf-8") as f:
                json.dump({"context": {"gpu": "NVIDIA H100 80GB HBM3",
                                       "skipped": [{"shape": "lm128k", "reason": "no files"}]},
                           "benchmarks": [{"name": "peer_cce/loss/lm128k", "run_type": "aggregate",
                                           "aggregate_name": "median", "real_time": 3.0, "time_unit": "ms"}]}, f)
            proc = run(peers)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["  - skipped: shape `lm128k`: no files",
                                               "### lm128k (trained model, bench/lm_data.py)",
                                               "| peer_cce | 3.000 | – | – | – | – | – | – | – |"])
            # Generated shapes come first, then lm32k, then lm128k, whatever the order of the files.
            proc = run(peers, FIXTURE)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["### small", "### gemma2", "### lm32k", "### lm128k"])

    def test_missing_file(self):
        self.assert_one_line_error(run(os.path.join(HERE, "no_such.json")), "cannot read")

    def test_malformed_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = os.path.join(tmp, "bad.json")
            with open(bad, "w", encoding="utf-8") as f:
                f.write('{"context": {}, "benchmarks": [')
            self.assert_one_line_error(run(bad), "not valid JSON")

    def test_not_benchmark_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, content, fragment in [
                ("list.json", "[1, 2]", "no \"benchmarks\" list"),
                ("empty.json", '{"benchmarks": []}', "no benchmark named"),
                ("no_time.json", '{"benchmarks": [{"name": "stage01_x/loss/small", "run_type": "aggregate",'
                                 ' "aggregate_name": "median", "time_unit": "ms"}]}', "has no real_time"),
            ]:
                path = os.path.join(tmp, name)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(content)
                self.assert_one_line_error(run(path), fragment)

    def test_update_without_markers(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "plain.md")
            with open(md, "w", encoding="utf-8") as f:
                f.write("# nothing to replace\n")
            self.assert_one_line_error(run(FIXTURE, "--update", md), "markers")
            self.assertEqual(open(md, encoding="utf-8").read(), "# nothing to replace\n")


if __name__ == "__main__":
    unittest.main(verbosity=2)
