#!/usr/bin/env python3
"""Markdown tables from benchmark JSON files (cce_bench's and the peers').

    python3 bench/results_table.py docs/bench_*.json                      # print
    python3 bench/results_table.py docs/bench_*.json --update docs/results.md

Reads Google Benchmark JSON files (build/bench/cce_bench --benchmark_out=FILE
--benchmark_out_format=json, and bench/peers.py's, written in the same schema)
whose benchmarks are named <impl>/<mode>/<shape>[/...]: impl is cublas_floor,
stageNN_name or peer_*, mode is loss or loss_grad. Writes one table per shape:
rows are the implementations (the cuBLAS floor, the stages in order, then the
peers), cells come from the "median" aggregate of each benchmark (time in ms,
counters peak_MB, floor_ratio, dE_rel_err, dC_rel_err, and kept_frac, the
share of backward tiles stages 07 and 08 keep, in a column of its own in the tables
where some benchmark has it; stage 08's drop_eps_log2 and dropped_mass, the
eps its automatic rule took, are read but not tabulated); a missing cell is "–". The trained-model shapes
(lm32k, lm128k: bench/lm_data.py) come after the generated ones, with N, D
and V read from the files' "cce_shapes" context.
With --update, the text between the markers <!-- results:begin --> and
<!-- results:end --> of that Markdown file is replaced; otherwise the block is
printed. Python 3 standard library only. Exit status 2, with a one-line
message, on a missing or malformed file.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys

BEGIN = "<!-- results:begin -->"
END = "<!-- results:end -->"
MODES = ("loss", "loss_grad")
SHAPES = {  # name -> (N, D, V), in table order
    "small": (4096, 2304, 32000),
    "gpt2": (20480, 768, 50257),
    "llama3": (8192, 4096, 128256),
    "gemma2": (8192, 2304, 256000),
}
LM_SHAPES = ("lm32k", "lm128k")  # trained-model data: N, D, V from the context's cce_shapes
SHAPE_IN_CONTEXT = re.compile(r"([A-Za-z0-9_]+) N=(\d+) D=(\d+) V=(\d+)")
PEER_ORDER = ["peer_torch_eager", "peer_torch_compile", "peer_cce", "peer_cce_nofilter", "peer_cce_exact",
              "peer_liger"]
TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
COUNTERS = ("peak_MB", "TFLOPs", "floor_ratio", "dE_rel_err", "dC_rel_err", "loss_rel_err", "kept_frac",
            "drop_eps_log2", "dropped_mass")
# Context keys left out of the details (the host CPU's, Google Benchmark's own).
CPU_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
               "load_avg", "library_build_type", "json_schema_version", "gpu_name", "gpu", "cce_commit", "commit",
               "skipped"}
DASH = "–"


class InputFault(Exception):
    """A missing or malformed input: reported in one line, exit status 2."""


class Result:
    """One benchmark (impl, mode, shape) of one file."""

    def __init__(self, source):
        self.source = source
        self.median = None  # {"ms": ..., counter: ...} from the median aggregate
        self.runs = []      # the same from plain iteration runs (used when there is no median aggregate)
        self.error = None   # Google Benchmark's error_message (SkipWithError)

    def values(self):
        if self.median is not None:
            return self.median
        if not self.runs:
            return None
        out = {"ms": statistics.median(r["ms"] for r in self.runs)}
        for name in COUNTERS:
            seen = [r[name] for r in self.runs if name in r]
            if seen:
                out[name] = statistics.median(seen)
        return out


def number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def entry_key(entry):
    """(impl, mode, shape) of a benchmark entry, or None for a name of another form."""
    name = entry.get("run_name")
    if not isinstance(name, str):
        name = entry.get("name")
        aggregate = entry.get("aggregate_name")
        if isinstance(name, str) and entry.get("run_type") == "aggregate" and isinstance(aggregate, str):
            if name.endswith("_" + aggregate):
                name = name[: -len(aggregate) - 1]
    if not isinstance(name, str):
        return None
    parts = name.split("/")
    if len(parts) < 3 or parts[1] not in MODES or not parts[0] or not parts[2]:
        return None
    return parts[0], parts[1], parts[2]


def measured(path, entry, label):
    unit = entry.get("time_unit")
    if not number(entry.get("real_time")) or unit not in TIME_TO_MS:
        raise InputFault(f"{path}: benchmark '{label}' has no real_time with a time_unit of ns, us, ms or s")
    out = {"ms": entry["real_time"] * TIME_TO_MS[unit]}
    for name in COUNTERS:
        if number(entry.get(name)):
            out[name] = float(entry[name])
    return out


def load(path):
    """Returns (context, {(impl, mode, shape): Result}) of one JSON file."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputFault(f"cannot read {path}: {e.strerror or e}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFault(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputFault(f"{path}: not a Google Benchmark JSON file (no \"benchmarks\" list)")
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise InputFault(f"{path}: \"context\" is not an object")
    results = {}
    for index, entry in enumerate(data["benchmarks"]):
        if not isinstance(entry, dict):
            raise InputFault(f"{path}: benchmark entry {index} is not an object")
        key = entry_key(entry)
        if key is None:
            continue  # not <impl>/<mode>/<shape>: not ours
        label = "/".join(key)
        result = results.setdefault(key, Result(path))
        if entry.get("error_occurred"):
            result.error = str(entry.get("error_message") or "error")
        elif entry.get("run_type") == "aggregate":
            if entry.get("aggregate_name") == "median":
                result.median = measured(path, entry, label)
        else:
            result.runs.append(measured(path, entry, label))
    # bench/peers.py lists the cases it skipped in context["skipped"]: {"run_name", "reason"}
    # for one case, {"impl", "reason"} for a whole implementation (see context_lines).
    for item in skipped_list(context):
        key = entry_key({"run_name": item["run_name"]}) if isinstance(item.get("run_name"), str) else None
        if key is not None and key not in results:
            results[key] = Result(path)
            results[key].error = str(item.get("reason") or "skipped")
    if not results and not skipped_list(context):
        raise InputFault(f"{path}: no benchmark named <impl>/<mode>/<shape> with mode loss or loss_grad")
    return context, results


def skipped_list(context):
    items = context.get("skipped")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def impl_order(impl):
    if impl == "cublas_floor":
        return (0, 0, impl)
    if impl.startswith("stage"):
        return (1, 0, impl)  # stageNN_name: the number orders them
    if impl in PEER_ORDER:
        return (2, PEER_ORDER.index(impl), impl)
    if impl.startswith("peer_"):
        return (2, len(PEER_ORDER), impl)
    return (3, 0, impl)


def shape_order(shape):
    names = list(SHAPES) + list(LM_SHAPES)
    return (names.index(shape), shape) if shape in names else (len(names), shape)


def context_dims(files):
    """{shape: (N, D, V)} from the "cce_shapes" text of the contexts ("name N=.. D=.. V=.., ..."); later files win."""
    dims = {}
    for _, context in files:
        text = context.get("cce_shapes")
        if isinstance(text, str):
            for m in SHAPE_IN_CONTEXT.finditer(text):
                dims[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
    return dims


def fmt_scaled(x, digits_below_10, digits_below_limit, limit):
    """x with fewer decimals as it grows; a dash for no value."""
    if x is None:
        return DASH
    if math.isnan(x):
        return "NaN"
    digits = digits_below_10 if x < 10 else digits_below_limit if x < limit else digits_below_limit - 1
    return f"{x:.{digits}f}"


def fmt_ms(x):
    return fmt_scaled(x, 3, 2, 100)


def fmt_mb(x):
    return fmt_scaled(x, 2, 1, 1000)


def fmt_ratio(x):
    if x is None or (not math.isnan(x) and x <= 0):
        return DASH  # 0: no floor of that shape and mode in the run
    return "NaN" if math.isnan(x) else f"{x:.2f}"


def fmt_err(x):
    if x is None:
        return DASH
    return "NaN" if math.isnan(x) else f"{x:.2e}"


def fmt_frac(x):
    if x is None:
        return DASH
    return "NaN" if math.isnan(x) else f"{100 * x:.1f}%"


def context_lines(files):
    lines = ["Run context (from the JSON files' context blocks):", ""]
    gpus = set()
    for path, context in files:
        gpu = context.get("gpu_name") or context.get("gpu") or "not recorded"
        gpus.add(gpu)
        commit = context.get("cce_commit") or context.get("commit") or "not recorded"
        date = context.get("date", "not recorded")
        lines.append(f"- `{os.path.basename(path)}`: GPU **{gpu}**, date {date}, commit `{commit}`")
        for key in sorted(context):
            value = context[key]
            if key in CPU_CONTEXT or isinstance(value, (dict, list)):
                continue
            lines.append(f"  - {key}: {value}")
        for item in skipped_list(context):
            if isinstance(item.get("impl"), str) and "run_name" not in item:
                lines.append(f"  - skipped: `{item['impl']}`: {item.get('reason') or 'no reason given'}")
            elif isinstance(item.get("shape"), str) and "run_name" not in item:
                lines.append(f"  - skipped: shape `{item['shape']}`: {item.get('reason') or 'no reason given'}")
    if len(gpus) > 1:
        lines += ["", "**The files come from different GPUs: compare rows of one GPU only.**"]
    return lines


LEGEND = [
    "Times are medians over 5 repetitions of CUDA-event times; MB is the peak device memory beyond the inputs"
    " (outputs included, cuBLAS workspace excluded); × floor is the time over the cuBLAS floor's of the same"
    " shape and mode in the same run; dE/dC err are relative L2 errors against an fp32 computation from the same"
    " bf16 inputs; kept tiles (where shown) is the share of backward tiles stage 07 keeps after filtering, or stage 08 recomputes."
    " See bench/README.md.",
]

HEADER = ("| implementation | loss ms | loss MB | loss+grad ms | loss+grad MB | × floor (loss) | × floor (loss+grad) "
          "| dE err | dC err |")
RULE = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"


def table_lines(shape, results, dims=None):
    dims = SHAPES.get(shape) or dims
    size = f"N={dims[0]}, D={dims[1]}, V={dims[2]}" if dims else ""
    if shape in LM_SHAPES:
        title = f"### {shape} (trained model, bench/lm_data.py" + (f": {size})" if size else ")")
    else:
        title = f"### {shape}" + (f" ({size})" if size else "")
    impls = sorted({impl for (impl, _, s) in results if s == shape}, key=impl_order)
    with_kept = any("kept_frac" in (r.values() or {}) for (_, _, s), r in results.items() if s == shape)
    lines = [title, "", HEADER + (" kept tiles |" if with_kept else ""), RULE + (" ---: |" if with_kept else "")]
    notes = []
    for impl in impls:
        cells, skipped = {}, {}
        for mode in MODES:
            result = results.get((impl, mode, shape))
            cells[mode] = result.values() if result is not None else None
            skipped[mode] = cells[mode] is None and result is not None and result.error is not None
            if result is not None and result.error is not None:
                what = "skipped" if skipped[mode] else "some repetitions failed"
                notes.append(f"- `{impl}` {mode.replace('_', '+')}: {what}: {result.error}")
        loss, grad = cells["loss"] or {}, cells["loss_grad"] or {}
        row = [
            impl,
            "skipped" if skipped["loss"] else fmt_ms(loss.get("ms")),
            fmt_mb(loss.get("peak_MB")),
            "skipped" if skipped["loss_grad"] else fmt_ms(grad.get("ms")),
            fmt_mb(grad.get("peak_MB")),
            fmt_ratio(loss.get("floor_ratio")),
            fmt_ratio(grad.get("floor_ratio")),
            fmt_err(grad.get("dE_rel_err")),
            fmt_err(grad.get("dC_rel_err")),
        ]
        if with_kept:
            row.append(fmt_frac(grad.get("kept_frac")))
        lines.append("| " + " | ".join(row) + " |")
    if notes:
        lines += [""] + notes
    return lines


def render(paths):
    files, merged = [], {}
    for path in paths:
        context, results = load(path)
        files.append((path, context))
        for key, result in results.items():
            if key in merged:
                print(f"results_table.py: note: {'/'.join(key)} is in {merged[key].source} and {path}; "
                      f"using {path}", file=sys.stderr)
            merged[key] = result
    lines = context_lines(files) + [""] + LEGEND
    dims = context_dims(files)
    for shape in sorted({s for (_, _, s) in merged}, key=shape_order):
        lines += [""] + table_lines(shape, merged, dims.get(shape))
    return "\n".join(lines) + "\n"


def update(markdown_path, block):
    try:
        with open(markdown_path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputFault(f"cannot read {markdown_path}: {e.strerror or e}")
    begin, end = text.find(BEGIN), text.find(END)
    if begin < 0 or end < 0 or end < begin:
        raise InputFault(f"{markdown_path}: no {BEGIN} ... {END} markers")
    text = text[: begin + len(BEGIN)] + "\n" + block + text[end:]
    tmp = markdown_path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, markdown_path)
    except OSError as e:
        raise InputFault(f"cannot write {markdown_path}: {e.strerror or e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description="Markdown tables from cce_bench / peers JSON files.")
    parser.add_argument("json", nargs="+", help="Google Benchmark JSON files")
    parser.add_argument("--update", metavar="MARKDOWN",
                        help=f"replace the text between {BEGIN} and {END} in this file instead of printing")
    args = parser.parse_args(argv)
    try:
        block = render(args.json)
        if args.update:
            update(args.update, block)
        else:
            sys.stdout.write(block)
    except InputFault as e:
        print(f"results_table.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
