#!/usr/bin/env python3
"""CPU tests of bench/results_table.py and bench/figures.py.

On fixture.json (Google Benchmark JSON as cce_bench writes it: aggregates, an errored case, a trained-model
shape (lm32k) with stage 07's kept_frac, one peer entry without run_name and with a time in us, and stage 10
at gemma2 as plain repetitions, without aggregates), on small files written here (two runs of one case, a new
stage), and on the committed docs/results.md and docs/*.json: the summary comes first, every number in it is
the newest file's value (its min–max spread too: shown where that file has min and max aggregates, as the
ladder's files do, "n/a" where it has neither them nor the repetitions; its mean ms the file's mean aggregate,
not its median or standard deviation), no quantity has two values, the file
is what the generator writes, the run contexts come last without local paths; the new shapes (gemma2_flat right
after gemma2, lm128k's training snapshots in training order before lm128k) in the summary and the tables.
bench/figures.py: one-line exit 1 on a missing JSON file; with matplotlib (/usr/bin/python3 usually has it; skipped
without) every PNG (the H200 sweep's too), each under 300 kB. Standard library only.

    python3 tests/bench/test_results_table.py
"""

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "bench", "results_table.py")
FIGURES = os.path.join(ROOT, "bench", "figures.py")
FIXTURE = os.path.join(HERE, "fixture.json")
DOCS = os.path.join(ROOT, "docs")
RESULTS_MD = os.path.join(DOCS, "results.md")
BLOCKS = ("summary", "tables", "appendix")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import results_table  # noqa: E402  (the blocks shown apart and their files)
FIGURE_NAMES = ("time_memory.png", "gradient_error.png", "eps_sweep.png", "training_sweep.png",
                "h200_time_memory.png", "h200_training_sweep.png", "h100_3ae9c50_time_memory.png",
                "h100_3ae9c50_training_sweep.png")

SUMMARY_HEADER = ("| shape | implementation | loss+grad ms | min–max ms | mean ms | loss+grad MB | dE err | dC err "
                  "| loss ms | loss MB |")
SUMMARY_ROWS = [
    SUMMARY_HEADER,
    "| gemma2 | cublas_floor | not measured | – | – | – | – | – | 13.90 | 4194 |",
    "| gemma2 | stage01_materialized | skipped | – | – | – | – | – | – | – |",
    # Plain repetitions (20.7, 19.8, 20.1), no aggregates: their median, fastest and slowest, and mean.
    "| gemma2 | stage10_plan_per_batch | 20.10 | 19.80–20.70 | 20.20 | 1397 | 2.90e-03 | 2.80e-03 "
    "| – | – |",
    # Aggregates only: no min-max; the mean where the file has a mean aggregate (stage 07's 4.3; its median 4.0 and
    # stddev 0.045 are not it), n/a where it has none.
    "| lm32k | cublas_floor | 2.500 | n/a | n/a | 600.0 | – | – | – | – |",
    "| lm32k | stage07_filter_sort | 4.000 | n/a | 4.300 | 80.9 | 3.50e-03 | 4.70e-03 | – | – |",
]
# An implementation with no case at a shape has no summary row there (stage 06 is measured at lm32k only,
# stage 10 at gemma2 only).
SUMMARY_ABSENT = ["| gemma2 | stage06_fused_backward |", "| lm32k | stage10_plan_per_batch |", "not measured | – | – |"
                  " – | – | – | – | – | – |"]
ROWS_SMALL = [
    "| cublas_floor | 0.412 | 262.1 | 1.650 | 428.5 | 1.00 | 1.00 | – | – |",
    "| stage01_materialized | 1.234 | 524.3 | 3.456 | 690.0 | 2.99 | 2.09 | 3.10e-03 | 2.70e-03 |",
    "| stage03_fused_gemm_ce | 0.789 | 0.54 | – | – | 1.92 | – | – | – |",
    "| peer_cce | 0.950 | 1.20 | – | – | 2.31 | – | – | – |",
    "Sources: `fixture.json` (floor, stages 01, 03, the peers).",
]
ROWS_GEMMA2 = [
    "### gemma2 (N=8192, D=2304, V=256000)",
    "| cublas_floor | 13.90 | 4194 | – | – | 1.00 | – | – | – | – |",
    "| stage01_materialized | – | – | skipped | – | – | – | – | – | – |",
    "| stage10_plan_per_batch | – | – | 20.10 | 1397 | – | – | 2.90e-03 | 2.80e-03 | 1.2% |",
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
SKELETON = "".join(f"intro {name}\n\n<!-- {name}:begin -->\n(nothing yet)\n<!-- {name}:end -->\n\n" for name in BLOCKS)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def run(*args, script=SCRIPT, python=sys.executable):
    return subprocess.run([python, script, *args], capture_output=True, text=True, encoding="utf-8")


def write_json(folder, name, context, benchmarks):
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"context": context, "benchmarks": benchmarks}, f)
    return path


def median_entry(name, ms, **counters):
    return {"name": name + "_median", "run_name": name, "run_type": "aggregate", "aggregate_name": "median",
            "real_time": ms, "time_unit": "ms", **counters}


def block(text, name):
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    return text[text.index(begin) + len(begin): text.index(end)]


def table_rows(text, header_start):
    """The rows (lists of cells) of every Markdown table of text whose header starts with header_start."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith(header_start):
            current = [line]
            tables.append(current)
        elif current is not None and line.startswith("|"):
            current.append(line)
        else:
            current = None
    return [[c.strip() for c in row.strip().strip("|").split("|")] for t in tables for row in t[2:]]


def fmt(kind, x):
    """The tables' formats, written again here (not imported) so that the test checks the generator."""
    if kind == "err":
        return f"{x:.2e}"
    if kind == "frac":
        return f"{100 * x:.1f}%"
    small, mid, limit = {"ms": (3, 2, 100), "mb": (2, 1, 1000)}[kind]
    digits = small if x < 10 else mid if x < limit else mid - 1
    return f"{x:.{digits}f}"


def committed_files():
    """The files docs/results.md is made from: the '- `name`: GPU' lines of its appendix block."""
    with open(RESULTS_MD, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"^- `([^`]+)`: GPU", block(text, "appendix"), re.M)


def oldest_first(names):
    """[(file, its JSON)] of the named files in docs/, oldest run first (undated files first), so that a later one
    wins: the rule, again, from the raw JSON."""
    def when(context):
        text = context.get("date", "")
        return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else datetime.min.replace(
            tzinfo=timezone.utc)

    files = []
    for index, name in enumerate(names):
        with open(os.path.join(DOCS, name), encoding="utf-8") as f:
            data = json.load(f)
        files.append((when(data["context"]), index, name, data))
    return [(name, data) for _, _, name, data in sorted(files, key=lambda x: x[:2])]


def newest_medians(names):
    """{(impl, mode, shape): (file, median entry)}, the newest file winning."""
    out = {}
    for name, data in oldest_first(names):
        for entry in data["benchmarks"]:
            if entry.get("run_type") == "aggregate" and entry.get("aggregate_name") == "median":
                impl, mode, shape = entry["run_name"].split("/")[:3]
                out[(impl, mode, shape)] = (name, entry)
    return out


def newest_spreads(names):
    """{(impl, mode, shape): (file, (min ms, max ms) or None, mean ms or None, aggregates)} from the raw JSON, the
    newest file winning: the repetitions' fastest and slowest from the plain runs when the file has two or more, else
    from its "min" and "max" aggregates, else None; the mean from its "mean" aggregate, else the plain runs' mean;
    aggregates: {aggregate name: ms}."""
    def ms(entry):
        return entry["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6, "s": 1e3}[entry["time_unit"]]

    out = {}
    for name, data in oldest_first(names):
        cases = {}
        for entry in data["benchmarks"]:
            key = tuple(entry.get("run_name", entry["name"]).split("/")[:3])
            if len(key) < 3 or key[1] not in ("loss", "loss_grad") or entry.get("error_occurred"):
                continue
            runs, aggregates = cases.setdefault(key, ([], {}))
            if entry.get("run_type") == "aggregate":
                if entry.get("aggregate_unit", "time") == "time":
                    aggregates[entry["aggregate_name"]] = ms(entry)
            else:
                runs.append(ms(entry))
        for key, (runs, aggregates) in cases.items():
            if len(runs) >= 2:
                span = (min(runs), max(runs))
            elif "min" in aggregates and "max" in aggregates:
                span = (aggregates["min"], aggregates["max"])
            else:
                span = None
            mean = aggregates.get("mean", sum(runs) / len(runs) if runs else None)
            out[key] = (name, span, mean, aggregates)
    return out


class Generator(unittest.TestCase):
    def assert_in_order(self, text, lines):
        pos = -1
        for line in lines:
            found = text.find(line, pos + 1)
            self.assertGreater(found, pos, f"missing or out of order: {line}\n--- output:\n{text}")
            pos = found

    def assert_one_line_error(self, proc, fragment, program="results_table.py"):
        self.assertNotEqual(proc.returncode, 0)
        lines = proc.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, proc.stderr)
        self.assertIn(f"{program}: error:", lines[0])
        self.assertIn(fragment, lines[0])

    def test_summary_first_then_tables_then_contexts(self):
        proc = run(FIXTURE)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = proc.stdout
        self.assertTrue(out.startswith("**One value per quantity:**"), out[:200])
        self.assert_in_order(out, [*SUMMARY_ROWS, "**Sources.** `gemma2`: `fixture.json` (floor, stages 01, 10). "
                                   "`lm32k`: `fixture.json` (floor, stages 06, 07).",
                                   "`stage01_materialized` loss+grad at `gemma2`: skipped: needs 26000.0 MB",
                                   "### small (N=4096, D=2304, V=32000)", "| implementation | loss ms |", *ROWS_SMALL,
                                   *ROWS_GEMMA2, *ROWS_LM32K,
                                   "- `fixture.json`: GPU **NVIDIA H100 80GB HBM3**, date 2025-03-04T10:11:12+00:00, "
                                   "commit `0123456789ab`; 12 of its 12 cases in the tables"])
        self.assertNotIn("| small |", out.split("### small")[0])  # the summary: gemma2 and the trained shapes only
        for row in SUMMARY_ABSENT:
            self.assertNotIn(row, out.split("### small")[0])
        self.assertNotIn("load_avg", out)          # the host CPU's context stays out
        self.assertNotIn("/tmp", out)              # and the local paths (cce_shapes' "(/tmp/...)")
        self.assertEqual(out.count("kept tiles |"), 2, out)  # only the tables with a kept_frac have the column

    def test_generated_output_is_deterministic(self):
        first, second = run(FIXTURE), run(FIXTURE)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout)

    def test_newest_run_wins_whatever_the_order(self):
        with tempfile.TemporaryDirectory() as tmp:
            case = "peer_cce/loss_grad/gemma2"
            old = write_json(tmp, "old.json", {"gpu": "G", "date": "2025-03-05T10:00:00+00:00"},
                             [median_entry(case, 50.0, peak_MB=1200.0, dE_rel_err=1e-2),
                              median_entry("peer_liger/loss_grad/gemma2", 200.0)])
            new = write_json(tmp, "new.json", {"gpu": "G", "date": "2025-03-06T09:00:00Z"},
                             [median_entry(case, 45.0, peak_MB=1100.0, dE_rel_err=9e-3)])
            outputs = []
            for order in ((old, new), (new, old)):
                proc = run(*order)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                out = proc.stdout
                self.assertIn("| gemma2 | peer_cce | 45.00 | n/a | n/a | 1100 | 9.00e-03 | – | – | – |", out)
                self.assertIn("| peer_cce | – | – | 45.00 | 1100 | – | – | 9.00e-03 | – |", out)
                self.assertNotIn("50.00", out)  # the older run's value appears nowhere
                self.assertIn("`new.json` (cce), `old.json` (liger)", out)
                self.assertIn("1 of its 1 cases in the tables", out)
                outputs.append(out.split("The files, in the order")[0])
            self.assertEqual(outputs[0], outputs[1])  # summary and tables do not depend on the order

    def test_undated_file_counts_as_oldest(self):
        with tempfile.TemporaryDirectory() as tmp:
            case = "stage07_filter_sort/loss/gemma2"
            dated = write_json(tmp, "dated.json", {"date": "2020-01-01T00:00:00"}, [median_entry(case, 14.0)])
            undated = write_json(tmp, "undated.json", {}, [median_entry(case, 15.0)])
            proc = run(dated, undated)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("| stage07_filter_sort | 14.00 |", proc.stdout)
            self.assertNotIn("15.00", proc.stdout)

    def test_a_new_stage_appears_without_a_code_change(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = write_json(tmp, "later.json", {"gpu": "G", "date": "2030-01-01T00:00:00Z"},
                              [median_entry("stage11_sharded_vocabulary/loss_grad/gemma2", 10.5, peak_MB=768.2),
                               median_entry("stage10_some_new_idea/loss/lm32k", 0.5, peak_MB=0.3)])
            proc = run(FIXTURE, path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, [
                "| gemma2 | stage10_plan_per_batch |",
                "| gemma2 | stage11_sharded_vocabulary | 10.50 | n/a | n/a | 768.2 |",
                "| lm32k | stage10_some_new_idea | – | – | – | – | – | – | 0.500 | 0.30 |",
                "| stage11_sharded_vocabulary | – | – | 10.50 | 768.2 |",
                "`later.json` (stage 11)"])
            summary = proc.stdout.split("### small")[0]
            self.assertNotIn("| gemma2 | stage10_some_new_idea |", summary)   # no case there: no row
            self.assertNotIn("| lm32k | stage11_sharded_vocabulary |", summary)

    def test_mean_column_is_the_mean_aggregate(self):
        """The summary's mean ms is the file's "mean" aggregate: not its median, its standard deviation or the middle
        of min-max; n/a for a case whose file has no mean."""
        with tempfile.TemporaryDirectory() as tmp:
            case = "stage10_plan_per_batch/loss_grad/gemma2_flat"

            def aggregate(name, ms):
                return {**median_entry(case, ms), "name": f"{case}_{name}", "aggregate_name": name}

            path = write_json(tmp, "bench.json", {"gpu": "G", "date": "2030-01-01T00:00:00Z"},
                              [median_entry(case, 45.0, peak_MB=5785.0), aggregate("mean", 47.25),
                               aggregate("stddev", 1.5), aggregate("min", 44.0), aggregate("max", 52.0),
                               median_entry("peer_torch_compile/loss_grad/gemma2_flat", 46.0)])
            proc = run(path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("| gemma2_flat | stage10_plan_per_batch | 45.00 | 44.00–52.00 | 47.25 | 5785 |", proc.stdout)
            self.assertIn("| gemma2_flat | peer_torch_compile | 46.00 | n/a | n/a |", proc.stdout)
            for wrong in ("45.00", "1.500", "48.00"):   # the median, the standard deviation, the middle of min-max
                self.assertNotIn(f"44.00–52.00 | {wrong} |", proc.stdout)
            self.assertIn("mean ms: the mean over all timed calls", proc.stdout)

    def test_peers_context_and_skips(self):
        with tempfile.TemporaryDirectory() as tmp:
            # As bench/peers.py writes it: "gpu", "commit", local paths, and the skipped cases in the context.
            peers = write_json(tmp, "peers.json",
                               {"gpu": "NVIDIA H100 80GB HBM3", "date": "2025-03-05", "commit": "fedcba987654",
                                "executable": "bench/peers.py", "torch": "2.5.1", "inputs": "/tmp/cce-inputs",
                                "skipped": [{"impl": "peer_torch_compile", "reason": "no torch.compile"},
                                            {"run_name": "peer_cce/loss_grad/small", "reason": "out of memory"},
                                            {"shape": "lm128k", "reason": "no files"}]},
                               [median_entry("peer_liger/loss_grad/small", 2.0, peak_MB=12.0, dE_rel_err=4e-3),
                                median_entry("peer_cce/loss/small", 0.8)])
            proc = run(FIXTURE, peers)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["| peer_cce | 0.800 | – | skipped | – | – | – | – | – |",
                                               "| peer_liger | – | – | 2.000 | 12.0 | – | – | 4.00e-03 | – |",
                                               "Sources: `fixture.json` (floor, stages 01, 03), "
                                               "`peers.json` (the peers).",
                                               "- `peer_cce` loss+grad at `small`: skipped: out of memory",
                                               "- `fixture.json`: GPU",
                                               "- `peers.json`: GPU **NVIDIA H100 80GB HBM3**, date 2025-03-05, "
                                               "commit `fedcba987654`; 3 of its 3 cases in the tables",
                                               "  - torch: 2.5.1",
                                               "  - skipped: `peer_torch_compile`: no torch.compile",
                                               "  - skipped: shape `lm128k`: no files"])
            self.assertNotIn("  - inputs:", proc.stdout)  # a value that is only a local path: left out
            self.assertNotIn("different GPUs", proc.stdout)

    def test_shape_order_and_unknown_size(self):
        with tempfile.TemporaryDirectory() as tmp:
            peers = write_json(tmp, "peers.json", {"gpu": "NVIDIA H100 80GB HBM3"},
                               [median_entry("peer_cce/loss/lm128k", 3.0)])
            proc = run(peers)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["`lm128k`: size not recorded, a trained model's data",
                                               "### lm128k (trained model, bench/lm_data.py)",
                                               "| peer_cce | 3.000 | – | – | – | – | – | – | – |"])
            # Generated shapes come first, then lm32k, then lm128k, whatever the order of the files.
            proc = run(peers, FIXTURE)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_in_order(proc.stdout, ["| gemma2 |", "| lm32k |", "| lm128k |", "### small", "### gemma2",
                                               "### lm32k", "### lm128k"])

    def test_flat_data_and_training_snapshots(self):
        """gemma2_flat comes right after gemma2, lm128k's snapshots in training order between lm32k and lm128k,
        each in the summary with words for its data; the snapshots' size from the context's cce_shapes."""
        with tempfile.TemporaryDirectory() as tmp:
            shapes = ["lm128k", "lm128k_s300", "gemma2_flat", "lm128k_s0", "lm32k", "lm128k_s30", "gemma2",
                      "lm128k_s100"]  # out of order on purpose
            context = {"gpu_name": "G", "date": "2030-01-02T00:00:00Z",
                       "cce_shapes": "gemma2_flat N=8192 D=2304 V=256000 (random data), lm32k N=8192 D=768 V=32000, "
                                     + ", ".join(f"lm128k{s} N=4096 D=2048 V=128000 (/tmp/x/lm128k{s})"
                                                 for s in ("", "_s0", "_s30", "_s100", "_s300"))}
            path = write_json(tmp, "run.json", context,
                              [median_entry(f"stage10_plan_per_batch/loss_grad/{s}", 10.0 + k, peak_MB=700.0,
                                            kept_frac=1.0 if s in ("gemma2_flat", "lm128k_s0") else 0.1)
                               for k, s in enumerate(shapes)])
            proc = run(path)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            out = proc.stdout
            summary, tables = out.split("### ")[0], out.split("### ", 1)[1]
            order = ["gemma2", "gemma2_flat", "lm32k", "lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300",
                     "lm128k"]
            self.assert_in_order(summary, [f"| {s} | stage10_plan_per_batch | {10.0 + shapes.index(s):.2f} |"
                                           for s in order])
            self.assert_in_order(summary, ["`gemma2_flat`: N=8192, D=2304, V=256000, flat random data",
                                           "`lm128k_s0`: N=4096, D=2048, V=128000, lm128k's model after 0 training "
                                           "steps", "`lm128k_s300`: N=4096, D=2048, V=128000, lm128k's model after "
                                           "300 training steps", "`lm128k`: N=4096, D=2048, V=128000, a trained "
                                           "model's data"])
            self.assert_in_order("### " + tables, [
                "### gemma2 (N=8192, D=2304, V=256000)", "### gemma2_flat (N=8192, D=2304, V=256000, flat random data)",
                "### lm32k (trained model, bench/lm_data.py: N=8192, D=768, V=32000)",
                "### lm128k_s0 (lm128k's model after 0 training steps, bench/lm_data.py: N=4096, D=2048, V=128000)",
                "| stage10_plan_per_batch | – | – | 13.00 | 700.0 | – | – | – | – | 100.0% |",
                "### lm128k_s30 (", "### lm128k_s100 (", "### lm128k_s300 (",
                "### lm128k (trained model, bench/lm_data.py: N=4096, D=2048, V=128000)"])
            self.assertNotIn("/tmp", out)

    def test_update_replaces_only_the_marked_blocks(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "results.md")
            with open(md, "w", encoding="utf-8") as f:
                f.write("# Results\n\n" + SKELETON + "## Reproduce\n")
            proc = run(FIXTURE, "--update", md)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(proc.stdout, "")
            text = read(md)
            self.assertTrue(text.startswith("# Results\n\nintro summary\n\n<!-- summary:begin -->\n**One value"))
            self.assertTrue(text.endswith("<!-- appendix:end -->\n\n## Reproduce\n"))
            self.assertNotIn("(nothing yet)", text)
            self.assertIn("\nintro tables\n", text)
            self.assert_in_order(text, SUMMARY_ROWS + ["intro tables"] + ROWS_SMALL + ROWS_GEMMA2
                                 + ["intro appendix", "- `fixture.json`: GPU"])
            self.assertIn("### small", block(text, "tables"))
            self.assertNotIn("### small", block(text, "summary"))
            # Idempotent: a second update gives the same file.
            self.assertEqual(run(FIXTURE, "--update", md).returncode, 0)
            self.assertEqual(read(md), text)

    def test_update_without_markers(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "plain.md")
            for content in ("# nothing to replace\n", SKELETON.replace("<!-- tables:end -->", "")):
                with open(md, "w", encoding="utf-8") as f:
                    f.write(content)
                self.assert_one_line_error(run(FIXTURE, "--update", md), "markers")
                self.assertEqual(read(md), content)

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

    def test_help_says_how_to_regenerate(self):
        proc = run("--help")
        self.assertEqual(proc.returncode, 0)
        self.assertIn("--update docs/results.md", " ".join(proc.stdout.split()))


class CommittedResults(unittest.TestCase):
    """docs/results.md as committed, against docs/*.json."""

    @classmethod
    def setUpClass(cls):
        with open(RESULTS_MD, encoding="utf-8") as f:
            cls.text = f.read()
        cls.files = committed_files()
        cls.newest = newest_medians(cls.files)
        cls.spreads = newest_spreads(cls.files)

    def test_it_names_the_files_and_they_exist(self):
        self.assertGreaterEqual(len(self.files), 2, "no '- `file`: GPU' line in the appendix block")
        for name in self.files:
            self.assertTrue(os.path.isfile(os.path.join(DOCS, name)), name)

    def test_it_is_what_the_generator_writes(self):
        with tempfile.TemporaryDirectory() as tmp:
            md = os.path.join(tmp, "results.md")
            shutil.copy(RESULTS_MD, md)
            proc = run(*[os.path.join(DOCS, n) for n in self.files], "--update", md)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_same(md, "docs/results.md is stale: "
                                 "run python3 bench/results_table.py --update docs/results.md")
            proc = run("--update", md)  # the default list is the same files
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assert_same(md, "bench/results_table.py's FILES differ from the files the appendix lists")

    def assert_same(self, path, message):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text != self.text:
            diff = difflib.unified_diff(self.text.splitlines(), text.splitlines(), "docs/results.md", "regenerated",
                                        lineterm="", n=1)
            self.fail(message + "\n" + "\n".join(list(diff)[:40]))

    def test_the_summary_opens_the_file_and_the_contexts_close_it(self):
        lines = self.text.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("| shape | implementation |"))
        self.assertLess(header, 15, "the summary table should open the file")
        others = "".join(block(self.text, name) for name in results_table.APART_BLOCKS)
        outside = self.text
        for name in results_table.APART_BLOCKS:
            outside = outside.replace(block(self.text, name), "")
        self.assertEqual(sum(line.startswith("| shape | implementation |") for line in outside.splitlines()), 1)
        self.assertEqual(sum(line.startswith("| shape | implementation |") for line in others.splitlines()),
                         len(results_table.APART_BLOCKS))
        self.assertIn("One value per quantity", "\n".join(lines[:header]))
        appendix = self.text.index("<!-- appendix:begin -->")
        self.assertFalse(re.search(r"^## ", self.text[appendix:], re.M), "a section after the run contexts")
        for name in BLOCKS:
            self.assertNotIn("/tmp/", block(self.text, name))
        for name in FIGURE_NAMES:
            self.assertIn(f"(figures/{name})", self.text)
            self.assertTrue(os.path.isfile(os.path.join(DOCS, "figures", name)), name)
            self.assertLess(os.path.getsize(os.path.join(DOCS, "figures", name)), 300 * 1024, name)

    def test_each_block_apart_holds_its_files_alone(self):
        gpus = {"h200_summary": "NVIDIA H200", "h100_3ae9c50_summary": "NVIDIA H100 80GB HBM3"}
        self.assertEqual(set(gpus), set(results_table.APART_BLOCKS))
        for name, gpu in gpus.items():
            text = block(self.text, name)
            files = re.findall(r"^- `([^`]+)`: GPU \*\*([^*]+)\*\*", text, re.M)
            self.assertEqual([f for f, _ in files], list(results_table.APART_BLOCKS[name]))
            self.assertEqual({g for _, g in files}, {gpu})
            for file in results_table.APART_BLOCKS[name]:
                self.assertNotIn(file, block(self.text, "appendix"), f"{name}'s file among the tables' files")
            self.assertIn("| gpt2 | stage10_plan_per_batch |", text)  # every shape, not only the summary's

    def test_every_summary_number_is_the_newest_files(self):
        rows = table_rows(block(self.text, "summary"), "| shape | implementation |")
        self.assertGreater(len(rows), 10)
        # gemma2, gemma2_flat and every trained-model shape of the files, in that order.
        self.assertEqual(list(dict.fromkeys(r[0] for r in rows)),
                         ["gemma2", "gemma2_flat", "lm32k", "lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300",
                          "lm128k"])
        self.assertFalse([r for r in rows if r[2] == "not measured" and r[8] == "–"],
                         "a summary row for an implementation not measured at its shape")
        checked, spread_from, means_apart = 0, set(), 0
        for shape, impl, grad_ms, span, mean, grad_mb, de, dc, loss_ms, loss_mb in rows:
            for mode, cells in (("loss_grad", [("ms", "ms", grad_ms), ("mb", "peak_MB", grad_mb),
                                               ("err", "dE_rel_err", de), ("err", "dC_rel_err", dc)]),
                                ("loss", [("ms", "ms", loss_ms), ("mb", "peak_MB", loss_mb)])):
                found = self.newest.get((impl, mode, shape))
                for kind, key, cell in cells:
                    if not re.match(r"^[0-9]", cell):
                        self.assertTrue(found is None or key not in found[1] and key != "ms",
                                        f"{shape} {impl} {mode} {key}: '{cell}' but {found and found[0]} has it")
                        continue
                    self.assertIsNotNone(found, f"{shape} {impl} {mode}: '{cell}' is in no JSON file")
                    name, entry = found
                    value = entry["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6, "s": 1e3}[entry["time_unit"]] \
                        if key == "ms" else entry[key]
                    self.assertEqual(cell, fmt(kind, value), f"{shape} {impl} {mode} {key}: not {name}'s")
                    checked += 1
            # min–max and the mean: from the file the loss + grad time comes from, its repetitions where it has them
            # (plain runs, or min and max aggregates), "n/a" where it has neither, "–" where nothing was measured;
            # the mean from its "mean" aggregate.
            found = self.spreads.get((impl, "loss_grad", shape))
            if not re.match(r"^[0-9]", grad_ms):
                self.assertEqual((span, mean), ("–", "–"), f"{shape} {impl}: a spread without a loss+grad time")
                continue
            self.assertIsNotNone(found, f"{shape} {impl}: a loss+grad time but no file holds the case")
            name, want_span, want_mean, aggregates = found
            self.assertEqual(name, self.newest[(impl, "loss_grad", shape)][0], f"{shape} {impl}")
            if want_span is None:
                self.assertEqual(span, "n/a", f"{shape} {impl}: '{span}', but {name} has no repetitions or min/max")
            else:
                self.assertEqual(span, f"{fmt('ms', want_span[0])}–{fmt('ms', want_span[1])}",
                                 f"{shape} {impl}: not the fastest and slowest repetition of {name}")
                self.assertLessEqual(want_span[0], want_span[1])
                spread_from.add(name)
            self.assertEqual(mean, "n/a" if want_mean is None else fmt("ms", want_mean),
                             f"{shape} {impl}: the mean is not {name}'s mean aggregate")
            # Count the rows where the mean reads otherwise than the median and the standard deviation: there a
            # column showing either would fail the check above.
            if "mean" in aggregates and mean not in (grad_ms, fmt("ms", aggregates.get("stddev", -1.0))):
                means_apart += 1
        self.assertGreater(checked, 100)
        self.assertGreater(means_apart, 50, "the mean column reads as the median or the standard deviation")
        # The ladder's files keep min and max aggregates: their spreads are shown; the older files' are not.
        self.assertTrue(spread_from, "no summary row shows a min–max spread")
        self.assertTrue(any(s == "n/a" for s in (r[3] for r in rows)), "every summary row shows a spread")

    def test_no_quantity_has_two_values(self):
        seen = {}

        def note(key, cell, where):
            if re.match(r"^[0-9]", cell):
                seen.setdefault(key, {}).setdefault(cell, where)

        for shape, impl, grad_ms, _, _, grad_mb, de, dc, loss_ms, loss_mb in table_rows(
                block(self.text, "summary"), "| shape | implementation |"):
            for metric, cell in (("loss_grad ms", grad_ms), ("loss_grad MB", grad_mb), ("dE", de), ("dC", dc),
                                 ("loss ms", loss_ms), ("loss MB", loss_mb)):
                note((impl, shape, metric), cell, "summary")
        tables = block(self.text, "tables")
        for section in re.split(r"^### ", tables, flags=re.M)[1:]:
            shape = section.split()[0]
            for row in table_rows(section, "| implementation |"):
                impl, loss_ms, loss_mb, grad_ms, grad_mb, _, _, de, dc = row[:9]
                for metric, cell in (("loss_grad ms", grad_ms), ("loss_grad MB", grad_mb), ("dE", de), ("dC", dc),
                                     ("loss ms", loss_ms), ("loss MB", loss_mb)):
                    note((impl, shape, metric), cell, f"table {shape}")
        twice = {k: v for k, v in seen.items() if len(v) > 1}
        self.assertFalse(twice, f"quantities with two values: {twice}")
        self.assertGreater(len(seen), 200)


class Figures(unittest.TestCase):
    def test_missing_json_is_one_line_exit_1(self):
        for args in (["--bench", os.path.join(HERE, "no_such.json")],
                     ["--sweeps", os.path.join(HERE, "no_such_sweep.json")]):
            with tempfile.TemporaryDirectory() as tmp:
                proc = run(*args, "--out", tmp, script=FIGURES)
                self.assertEqual(proc.returncode, 1, proc.stderr)
                lines = proc.stderr.strip().splitlines()
                self.assertEqual(len(lines), 1, proc.stderr)
                self.assertIn("figures.py: error: cannot read", lines[0])
                self.assertIn("no_such", lines[0])
                self.assertEqual(os.listdir(tmp), [])

    def test_every_png(self):
        python = next((p for p in (sys.executable, "/usr/bin/python3") if os.path.exists(p) and subprocess.run(
            [p, "-c", "import matplotlib"], capture_output=True).returncode == 0), None)
        if python is None:
            self.skipTest("no Python with matplotlib (python3-matplotlib)")
        with tempfile.TemporaryDirectory() as tmp:
            proc = run("--out", tmp, script=FIGURES, python=python)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            for name in FIGURE_NAMES:
                path = os.path.join(tmp, name)
                with open(path, "rb") as f:
                    head = f.read(24)
                self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n", name)
                width, height = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
                self.assertTrue(800 <= width <= 2000 and 300 <= height <= 2000, f"{name}: {width}x{height}")
                # Small enough to commit; the bound leaves room for the encoder: the same h200_time_memory.png is
                # 273 KB from matplotlib 3.6 (Debian 12's) and 338 KB from 3.11.
                self.assertLess(os.path.getsize(path), 450 * 1024, name)


if __name__ == "__main__":
    unittest.main(verbosity=2)
