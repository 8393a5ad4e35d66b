#!/usr/bin/env python3
"""The generated parts of docs/results.md, from benchmark JSON files (cce_bench's and the peers').

    python3 bench/results_table.py                                  # the committed files (FILES below): print
    python3 bench/results_table.py --update docs/results.md         # ... and rewrite the generated blocks
    python3 bench/results_table.py docs/bench_a.json docs/bench_b.json --update docs/results.md

Reads Google Benchmark JSON files (build/bench/cce_bench --benchmark_out=FILE --benchmark_out_format=json,
and bench/peers.py's, written in the same schema) whose benchmarks are named <impl>/<mode>/<shape>[/...]:
impl is cublas_floor, stageNN_name or peer_*, mode is loss or loss_grad. The implementations, the stages
among them, come from the files: a new stage appears without a change here. Writes three blocks:

  summary   one table: every implementation measured at gemma2, gemma2_flat and the trained-model shapes
            (lm32k, lm128k's training snapshots lm128k_s0 ... lm128k_s300, lm128k) present: loss+grad
            time (the median), its spread (min-max of the repetitions where the file has them, "n/a" where it
            has only aggregates), its mean over all timed calls (the "mean" aggregate, or the plain runs' mean;
            "n/a" where the file has neither), peak memory, dE and dC error, then the loss alone; an
            implementation with no case at a shape has no row there; a footnote says which file each
            column comes from. The mean is the time to compare across cce_bench and peers.py: cce_bench's
            files written before commit ee8ffb6 (2026-11-28; benchmark names with /iterations:10/) hold
            repetitions of 10 calls, so their median is a median of 10-call means, while peers.py's (and
            later cce_bench's) repetitions are single calls; a mean of all calls is the same statistic in both.
  tables    one table per shape (the generated shapes, then the trained-model ones), the same footnote.
  appendix  the run context of each file (GPU, date, commit, versions, clocks), local paths left out; a file
            whose context has both cce_bench's own cce_commit and a different commit written by hand shows both.

One value per case: when several files hold the same (impl, mode, shape), every table takes the newest
run, the file whose context "date" is latest (a file without a date counts as the oldest; on equal dates
the one named later wins). Cells come from the "median" aggregate (time in ms; counters peak_MB,
floor_ratio, dE_rel_err, dC_rel_err, kept_frac, ...), or from the median of the plain runs when a case
has no aggregates. A missing cell is "-".

With --update, the text between each block's markers (<!-- summary:begin --> ... <!-- summary:end -->,
and the same for tables and appendix) in that Markdown file is replaced; otherwise the three blocks are
printed. Python 3 standard library only; deterministic (the output depends on the files alone). Exit
status 2, with a one-line message, on a missing or malformed file or a Markdown file without the markers.
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The files docs/results.md is made from, in docs/ (bench_sm80_h100.json stays out: an sm_80-only build).
# bench_stage10_first_h100_a85669c.json holds stage 10's loss + grad at gemma2_flat and lm128k_s0, run alone just
# before bench_dense_plan_h100_a85669c.json in the same device call (the same binary; a test of whether the floor
# running first changes stage 10's time): its date is earlier, so the newest-run rule takes both cases from the
# later file and the appendix lists it with none of its cases in the tables.
FILES = ("bench_cpp.json", "bench_cpp_lm128k.json", "bench_cpp_lm32k.json", "bench_peers.json",
         "bench_peers_lm128k.json", "bench_peers_lm32k.json", "bench_peers_stage08.json",
         "bench_peers_stage08_lm32k.json", "bench_stage08.json", "bench_stage08_lm32k.json",
         "bench_ladder_h100_43de66b.json", "bench_ladder_lm_h100_43de66b.json", "bench_peers_ladder_lm_h100.json",
         "bench_h100_79c303f.json", "bench_peers_h100_79c303f.json", "bench_h100_422112f.json",
         "bench_peers_h100_422112f.json", "bench_lm_h100_422112f.json", "bench_peers_lm_h100_422112f.json",
         "bench_peers_op_h100_3070454.json", "bench_h100_1058222.json", "bench_peers_h100_1058222.json",
         "bench_dense_plan_h100_164d8ce.json", "bench_peers_dense_plan_h100_164d8ce.json",
         "bench_dense_plan_h100_18ae454.json", "bench_peers_dense_plan_h100_18ae454.json",
         "bench_dense_plan_h100_4bb2fec.json", "bench_peers_dense_plan_h100_4bb2fec.json",
         "bench_stage10_first_h100_a85669c.json", "bench_dense_plan_h100_a85669c.json",
         "bench_peers_dense_plan_h100_a85669c.json")
BLOCKS = ("summary", "tables", "appendix")
# Runs shown apart from the tables get a block of their own: the summary of their files alone at every shape, then
# the files' contexts. Another GPU's (no table mixes two GPUs): the NVIDIA H200's. At 644edbb (stage 10's candidates
# half an exponent apart; 644edbb adds device scripts to c8ed436) every shape of the tables in one run on one machine:
# the floor and stage 10 (loss and loss + grad) and stage 06 at gemma2, then the peers with QuACK in turns beside the
# op. Cut Cross-Entropy and Liger were not on that machine: their rows come from the newest of three older runs that
# have them (69ee916, 7d25ee1, e8fc48e). The other H200 files in docs/ (bench_h200_*.json and bench_peers_h200_*.json
# of 3a72614 to 430eaf8) hold no case newer than 644edbb's and stay for stage 10's WORKLOG. And the H100's newest run,
# session 64 at 3ae9c50: every shape in one run on one machine (the floor, stage 10, stage 06 at gemma2_flat, then the
# peers but QuACK with the op in turns), kept apart from the tables above, whose text notebooks/02_stage_results.ipynb
# checks file by file against the sessions that made them.
APART_BLOCKS = {"h200_summary": ("bench_peers_h200_e8fc48e.json", "bench_peers_h200_7d25ee1.json",
                                 "bench_peers_h200_69ee916.json", "bench_h200_644edbb.json",
                                 "bench_peers_h200_644edbb.json"),
                "h100_3ae9c50_summary": ("bench_h100_3ae9c50.json", "bench_peers_h100_3ae9c50.json")}
MARKERS = {name: (f"<!-- {name}:begin -->", f"<!-- {name}:end -->") for name in BLOCKS + tuple(APART_BLOCKS)}
# The block that names the files, one "- `file`: GPU ..." line each (notebooks/02_stage_results.ipynb reads it).
BEGIN, END = MARKERS["appendix"]
MODES = ("loss", "loss_grad")
SHAPES = {  # name -> (N, D, V), in table order
    "small": (4096, 2304, 32000),
    "gpt2": (20480, 768, 50257),
    "llama3": (8192, 4096, 128256),
    "gemma2": (8192, 2304, 256000),
    "gemma2_flat": (8192, 2304, 256000),  # gemma2's shape on flat random data (an untrained model's softmax)
    "gemma2_softcap": (8192, 2304, 256000),  # gemma2 with Gemma-2's softcap, z = 30·tanh(logit/30)
}
FLAT_SHAPES = ("gemma2_flat",)
# Trained-model data (bench/lm_data.py), N, D, V from the context's cce_shapes: lm32k, then lm128k's model at
# training steps 0, 30, 100 and 300 (lm128k_sK), in training order, then the final lm128k model.
LM_SHAPES = ("lm32k", "lm128k_s0", "lm128k_s30", "lm128k_s100", "lm128k_s300", "lm128k")
SUMMARY_SHAPES = ("gemma2", "gemma2_flat") + LM_SHAPES  # those of them present in the files
ALL_SHAPES = tuple(SHAPES) + LM_SHAPES  # another GPU's block and figure: every shape its files ran
SNAPSHOT = re.compile(r"^(lm\w+?)_s(\d+)$")  # lm128k_s30: lm128k's model at training step 30
SHAPE_IN_CONTEXT = re.compile(r"([A-Za-z0-9_]+) N=(\d+) D=(\d+) V=(\d+)")
PEER_ORDER = ["peer_torch_eager", "peer_torch_compile", "peer_cce", "peer_cce_nofilter", "peer_cce_exact",
              "peer_liger", "peer_quack"]
PEER_NAMES = {"peer_torch_eager": "PyTorch eager", "peer_torch_compile": "torch.compile",
              "peer_cce": "Cut Cross-Entropy (its default, filtered backward)",
              "peer_cce_nofilter": "Cut Cross-Entropy without the filter", "peer_cce_exact": "Cut Cross-Entropy, exact",
              "peer_liger": "Liger-Kernel", "peer_quack": "QuACK (chunked, its base pipeline)"}
TIME_TO_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
# dropped_mass: what the files of runs before the misplaced mass hold in its place.
COUNTERS = ("peak_MB", "TFLOPs", "floor_ratio", "dE_rel_err", "dC_rel_err", "loss_rel_err", "kept_frac",
            "drop_eps_log2", "misplaced_mass", "dropped_mass")
# Context keys left out of the appendix (the host CPU's, Google Benchmark's own, and those shown apart).
CPU_CONTEXT = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
               "load_avg", "library_build_type", "json_schema_version", "gpu_name", "gpu", "cce_commit", "commit",
               "skipped"}
LOCAL_PATH_IN_PARENS = re.compile(r"\s*\(/[^)]*\)")
LOCAL_PATH = re.compile(r"(?<![\w.])/[^\s,;()]+")
DASH = "–"
NA = "n/a"


class InputFault(Exception):
    """A missing or malformed input: reported in one line, exit status 2."""


class Result:
    """One benchmark (impl, mode, shape) of one file."""

    def __init__(self, source):
        self.source = source
        self.median = None      # {"ms": ..., counter: ...} from the median aggregate
        self.aggregates = {}    # aggregate name -> its time in ms (mean, stddev, min, max, ...)
        self.runs = []          # the same as median from plain runs (the repetitions, when the file has them)
        self.error = None       # Google Benchmark's error_message (SkipWithError)

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

    def spread(self):
        """(min, max) of the repetitions' times in ms: from the plain runs, or min and max aggregates; else None."""
        if len(self.runs) >= 2:
            times = [r["ms"] for r in self.runs]
            return min(times), max(times)
        if "min" in self.aggregates and "max" in self.aggregates:
            return self.aggregates["min"], self.aggregates["max"]
        return None

    def mean(self):
        """The mean time in ms over all timed calls: the "mean" aggregate, else the plain runs' mean; else None.

        With the same number of calls per repetition, the mean of the repetitions' means is the mean of the calls,
        whatever a repetition is (10 calls in cce_bench's files before ee8ffb6, one call in peers.py's)."""
        if "mean" in self.aggregates:
            return self.aggregates["mean"]
        if self.runs:
            return statistics.mean(r["ms"] for r in self.runs)
        return None

    def stddev(self):
        """The standard deviation of the repetitions' times in ms, or None."""
        if "stddev" in self.aggregates:
            return self.aggregates["stddev"]
        if len(self.runs) >= 2:
            return statistics.stdev(r["ms"] for r in self.runs)
        return None


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
            aggregate = entry.get("aggregate_name")
            if aggregate == "median":
                result.median = measured(path, entry, label)
            elif isinstance(aggregate, str) and entry.get("aggregate_unit", "time") == "time":
                result.aggregates[aggregate] = measured(path, entry, label)["ms"]
        else:
            result.runs.append(measured(path, entry, label))
    # bench/peers.py lists the cases it skipped in context["skipped"]: {"run_name", "reason"}
    # for one case, {"impl", "reason"} for a whole implementation (see appendix_lines).
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


def run_date(context):
    """The context's date as an aware datetime (UTC when it names no zone); None without a readable one."""
    text = context.get("date")
    if not isinstance(text, str):
        return None
    text = text.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)


def select(loaded):
    """{key: Result}: for each case, the Result of the newest file holding it (see the module's docstring).

    loaded: [(path, context, results)] in the order given."""
    oldest = datetime.min.replace(tzinfo=timezone.utc)
    order = sorted(range(len(loaded)), key=lambda i: (run_date(loaded[i][1]) or oldest, i))
    merged = {}
    for i in order:
        merged.update(loaded[i][2])
    return merged


RULE_SENTENCE = ("**One value per quantity:** where several files hold the same case (implementation, mode, shape),"
                 " every table here takes the newest run, from the file whose context `date` is latest; the"
                 " **Sources** line under each table names the files, the appendix gives their dates.")


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


def is_trained(shape):
    return shape in LM_SHAPES


def snapshot_of(shape):
    """(model, step) for a training snapshot's shape (lm128k_s30 -> ("lm128k", 30)), else None."""
    m = SNAPSHOT.match(shape)
    return (m.group(1), int(m.group(2))) if m and is_trained(shape) else None


def data_words(shape):
    """What a shape's inputs are, in a few words."""
    snap = snapshot_of(shape)
    if snap:
        return f"{snap[0]}'s model after {snap[1]} training steps"
    if is_trained(shape):
        return "a trained model's data"
    return "flat random data" if shape in FLAT_SHAPES else "generated data"


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


def fmt_eps(log2_eps):
    """2^-13, 2^-12.5, 2^-12.75 (stage 10's candidates lie on quarter exponents; a float eps's log2 is off by ~1e-8)."""
    if log2_eps is None:
        return DASH
    quarter = round(4 * log2_eps) / 4
    return f"2^{quarter:g}" if abs(log2_eps - quarter) < 1e-6 else f"2^{log2_eps:.3f}"


def fmt_spread(span):
    return NA if span is None else f"{fmt_ms(span[0])}–{fmt_ms(span[1])}"


def fmt_mean(x):
    return NA if x is None else fmt_ms(x)


def shape_title(shape, dims):
    size = f"N={dims[0]}, D={dims[1]}, V={dims[2]}" if dims else ""
    snap = snapshot_of(shape)
    if snap:
        return (f"{shape} ({snap[0]}'s model after {snap[1]} training steps, bench/lm_data.py"
                + (f": {size})" if size else ")"))
    if is_trained(shape):
        return f"{shape} (trained model, bench/lm_data.py" + (f": {size})" if size else ")")
    if shape in FLAT_SHAPES:
        return f"{shape} (" + (f"{size}, " if size else "") + "flat random data)"
    return f"{shape}" + (f" ({size})" if size else "")


# --- Sources: which file each column's numbers come from ------------------------------------------------------

def short_impl(impl):
    if impl == "cublas_floor":
        return "floor"
    if impl.startswith("peer_"):
        return impl[len("peer_"):]
    return impl


def stage_number(impl):
    m = re.match(r"stage(\d+)", impl)
    return int(m.group(1)) if m else None


def is_stage_op(impl):
    """A stage called through its PyTorch op (peers.py's stage10_plan_per_batch_op), not the stage's executable."""
    return stage_number(impl) is not None and impl.endswith("_op")


def impl_list(impls, all_peers):
    """A compact name for a group of implementations: 'floor, stages 01-06, the peers'."""
    parts = []
    if "cublas_floor" in impls:
        parts.append("floor")
    numbers = sorted(stage_number(i) for i in impls if stage_number(i) is not None and not is_stage_op(i))
    if numbers:
        runs, start = [], numbers[0]
        for a, b in zip(numbers, numbers[1:] + [None]):
            if b != a + 1:  # a run start..a ends here: three or more as a range
                runs += [f"{start:02d}–{a:02d}"] if a - start >= 2 else [f"{k:02d}" for k in range(start, a + 1)]
                start = b
        parts.append(("stage " if len(numbers) == 1 else "stages ") + ", ".join(runs))
    peers = sorted((i for i in impls if i.startswith("peer_")), key=impl_order)
    if peers:
        parts.append("the peers" if set(peers) == set(all_peers) else ", ".join(short_impl(p) for p in peers))
    parts += [f"stage {stage_number(i):02d}'s op" for i in sorted(impls, key=impl_order) if is_stage_op(i)]
    parts += [short_impl(i) for i in sorted(impls, key=impl_order)
              if i != "cublas_floor" and stage_number(i) is None and not i.startswith("peer_")]
    return ", ".join(parts)


def sources_of(merged, shape, modes, impls):
    """'`a.json` (floor, stages 07-08), `b.json` (the peers)' for those cases; '' when there is none."""
    by_file, first = {}, {}
    for impl in sorted(impls, key=impl_order):
        for mode in modes:
            result = merged.get((impl, mode, shape))
            if result is None:
                continue
            name = os.path.basename(result.source)
            by_file.setdefault(name, set()).add(impl)
            first.setdefault(name, impl_order(impl))
    peers = {i for i in impls if i.startswith("peer_") and any((i, m, shape) in merged for m in modes)}
    return ", ".join(f"`{name}` ({impl_list(by_file[name], peers)})"
                     for name in sorted(by_file, key=lambda n: (first[n], n)))


def sources_line(merged, shape, impls, label=None):
    """The sources of one shape's cells: once when both modes agree on each implementation's file, else per mode."""
    files = {m: {i: os.path.basename(merged[(i, m, shape)].source) for i in impls if (i, m, shape) in merged}
             for m in MODES}
    agree = all(files["loss"][i] == files["loss_grad"][i] for i in set(files["loss"]) & set(files["loss_grad"]))
    head = f"{label}: " if label else ""
    if agree:
        return head + sources_of(merged, shape, MODES, impls)
    return head + "; ".join(f"{mode.replace('_', '+')}: {sources_of(merged, shape, (mode,), impls)}"
                            for mode in ("loss_grad", "loss") if files[mode])


# --- The summary ----------------------------------------------------------------------------------------------

SUMMARY_HEADER = ("| shape | implementation | loss+grad ms | min–max ms | mean ms | loss+grad MB | dE err | dC err "
                  "| loss ms | loss MB |")
SUMMARY_RULE = "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"


def summary_lines(merged, dims, summary_shapes=SUMMARY_SHAPES):
    shapes = [s for s in summary_shapes if any(k[2] == s for k in merged)]
    if not shapes:
        return [RULE_SENTENCE, "", "(No run at " + ", ".join(summary_shapes) + " in these files.)"]
    impls = sorted({i for (i, _, s) in merged if s in shapes}, key=impl_order)
    with_grad = {i for (i, m, _) in merged if m == "loss_grad"}  # has a backward at some shape
    lines = [RULE_SENTENCE, "", SUMMARY_HEADER, SUMMARY_RULE]
    for shape in shapes:
        for impl in impls:
            loss, grad = merged.get((impl, "loss", shape)), merged.get((impl, "loss_grad", shape))
            if loss is None and grad is None:
                continue  # not measured at this shape: no row
            lv = (loss.values() if loss is not None else None) or {}
            gv = (grad.values() if grad is not None else None) or {}
            if grad is None:
                grad_ms = DASH if impl not in with_grad else "not measured"
                timing = [grad_ms, DASH, DASH]
            elif not gv:
                timing = ["skipped", DASH, DASH]
            else:
                timing = [fmt_ms(gv.get("ms")), fmt_spread(grad.spread()), fmt_mean(grad.mean())]
            loss_ms = "skipped" if (loss is not None and not lv) else fmt_ms(lv.get("ms"))
            row = [shape, impl, *timing, fmt_mb(gv.get("peak_MB")), fmt_err(gv.get("dE_rel_err")),
                   fmt_err(gv.get("dC_rel_err")), loss_ms, fmt_mb(lv.get("peak_MB"))]
            lines.append("| " + " | ".join(row) + " |")
    sizes = "; ".join(f"`{s}`: "
                      + (f"N={dims[s][0]}, D={dims[s][1]}, V={dims[s][2]}" if s in dims else "size not recorded")
                      + f", {data_words(s)}" for s in shapes)
    peers = [p for p in PEER_ORDER if p in impls] + [p for p in impls if p.startswith("peer_") and p not in PEER_ORDER]
    lines += [
        "",
        f"Shapes: {sizes}. ms: the median of the repetitions' CUDA-event times: in `cce_bench` files written before"
        " commit ee8ffb6 (2026-11-28) a median of five 10-call means, in `peers.py` files and later `cce_bench` ones"
        f" a median of single calls; min–max: the fastest and the slowest repetition, {NA} where the file keeps only"
        " aggregates; mean ms: the mean over all timed calls, the same statistic in every file, so the one to"
        f" compare across the two tools ({NA} where the file has none); MB: peak device memory beyond the inputs"
        " (outputs included);"
        " dE, dC err: relative L2 error against an fp32 computation from the same bf16 inputs; loss ms and loss MB:"
        f" the forward alone. {DASH}: not this mode (no backward) or no value; not measured: no run of it in"
        " that mode at that shape; an implementation with no row at a shape has no run there." + (" Peers: " + "; ".join(f"{p}: {PEER_NAMES.get(p, p)}" for p in peers) + "." if peers else ""),
        "",
        "**Sources.** " + ". ".join(sources_line(merged, s, impls, f"`{s}`") for s in shapes) + ".",
    ]
    notes = skip_notes(merged, [(i, m, s) for s in shapes for i in impls for m in MODES])
    return lines + ([""] + notes if notes else [])


def skip_notes(merged, keys):
    notes = []
    for impl, mode, shape in keys:
        result = merged.get((impl, mode, shape))
        if result is not None and result.error is not None:
            what = "skipped" if not result.values() else "some repetitions failed"
            notes.append(f"- `{impl}` {mode.replace('_', '+')} at `{shape}`: {what}: {result.error}")
    return notes


# --- The per-shape tables -------------------------------------------------------------------------------------

LEGEND = [
    "Times are medians of the repetitions' CUDA-event times (in `cce_bench` files written before commit ee8ffb6,"
    " 2026-11-28, medians of five 10-call means; in `peers.py` files and later `cce_bench` ones, medians of single"
    " calls: compare the two tools by the summary's mean ms); MB is the peak"
    " device memory beyond the inputs (outputs included, cuBLAS workspace excluded); × floor is the time over the"
    " cuBLAS floor's of the same shape and mode in the same run (the floor row of a table may come from another"
    " run: see its Sources; – where the file records none); dE/dC err are relative L2 errors against an fp32"
    " computation from the same bf16 inputs; kept tiles (where shown) is the share of backward tiles stage 07 keeps"
    " after filtering, or stages 08–10 recompute (100% where stage 10 ran its dense plan, which recomputes every"
    " pair with cuBLAS once more than a third are kept). See bench/README.md.",
]

HEADER = ("| implementation | loss ms | loss MB | loss+grad ms | loss+grad MB | × floor (loss) | × floor (loss+grad) "
          "| dE err | dC err |")
RULE = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"


def table_lines(shape, results, dims=None):
    dims = SHAPES.get(shape) or dims
    impls = sorted({impl for (impl, _, s) in results if s == shape}, key=impl_order)
    with_kept = any("kept_frac" in (r.values() or {}) for (_, _, s), r in results.items() if s == shape)
    lines = ["### " + shape_title(shape, dims), "", HEADER + (" kept tiles |" if with_kept else ""),
             RULE + (" ---: |" if with_kept else "")]
    for impl in impls:
        cells, skipped = {}, {}
        for mode in MODES:
            result = results.get((impl, mode, shape))
            cells[mode] = result.values() if result is not None else None
            skipped[mode] = cells[mode] is None and result is not None and result.error is not None
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
    lines += ["", "Sources: " + sources_line(results, shape, impls) + "."]
    notes = skip_notes(results, [(i, m, shape) for i in impls for m in MODES])
    return lines + ([""] + notes if notes else [])


def tables_lines(merged, dims):
    lines = list(LEGEND)
    for shape in sorted({s for (_, _, s) in merged}, key=shape_order):
        lines += [""] + table_lines(shape, merged, dims.get(shape))
    return lines


# --- The appendix: run contexts -------------------------------------------------------------------------------

def context_text(value):
    """A context value as shown, local paths left out; None when nothing but a path is left."""
    text = LOCAL_PATH_IN_PARENS.sub("", str(value)).strip()
    if not text or LOCAL_PATH.fullmatch(text):
        return None
    return LOCAL_PATH.sub("(a local path)", text)


def shown_context(context):
    out = {}
    for key in sorted(context):
        value = context[key]
        if key in CPU_CONTEXT or isinstance(value, (dict, list)):
            continue
        text = context_text(value)
        if text is not None:
            out[key] = text
    return out


def producer(context):
    """The program that wrote a file (the basename of its context's executable: cce_bench, peers.py)."""
    executable = context.get("executable")
    return os.path.basename(executable) if isinstance(executable, str) and executable else "an unnamed program"


def appendix_lines(loaded, merged):
    shown = [(path, context, results, shown_context(context)) for path, context, results in loaded]
    used = {}
    for result in merged.values():
        used[result.source] = used.get(result.source, 0) + 1
    lines = ["The files, in the order given to `bench/results_table.py`, each with the number of its cases that"
             " the tables above take (the others are in a newer file); local paths are left out."]
    # Keys with one value in every file of one program that records them: said once for that program.
    common = {}
    for prog in sorted({producer(c) for _, c, _, _ in shown}):
        group = [(os.path.basename(p), items) for p, c, _, items in shown if producer(c) == prog]
        if len(group) < 2:
            continue
        values = {}
        for name, items in group:
            for key, text in items.items():
                values.setdefault(key, []).append((name, text))
        alike = {k: v for k, v in values.items() if len(v) > 1 and len({t for _, t in v}) == 1}
        if not alike:
            continue
        lines += ["", f"Alike in the {len(group)} files of `{prog}` "
                      f"({', '.join(f'`{n}`' for n, _ in group)}), where recorded:", ""]
        for key, seen in alike.items():
            only = f" (only {', '.join(f'`{n}`' for n, _ in seen)})" if len(seen) < len(group) else ""
            lines.append(f"- {key}: {seen[0][1]}{only}")
            for name, _ in seen:
                common.setdefault(name, set()).add(key)
    lines += ["", "Per file:", ""] if common else [""]
    gpus = set()
    for path, context, results, items in shown:
        name = os.path.basename(path)
        gpu = context.get("gpu_name") or context.get("gpu") or "not recorded"
        gpus.add(gpu)
        own, given = context.get("cce_commit"), context.get("commit")   # cce_bench's record; one written by hand
        commit = (f"`{given}` (cce_bench recorded `{own}`)" if own and given and own != given
                  else f"`{own or given or 'not recorded'}`")
        date = context.get("date", "not recorded")
        lines.append(f"- `{name}`: GPU **{gpu}**, date {date}, commit {commit};"
                     f" {used.get(path, 0)} of its {len(results)} cases in the tables")
        for key, text in items.items():
            if key not in common.get(name, ()):
                lines.append(f"  - {key}: {text}")
        for item in skipped_list(context):
            if isinstance(item.get("impl"), str) and "run_name" not in item:
                lines.append(f"  - skipped: `{item['impl']}`: {item.get('reason') or 'no reason given'}")
            elif isinstance(item.get("shape"), str) and "run_name" not in item:
                lines.append(f"  - skipped: shape `{item['shape']}`: {item.get('reason') or 'no reason given'}")
    if len(gpus) > 1:
        lines += ["", "**The files come from different GPUs: compare rows of one GPU only.**"]
    return lines


# --- Putting it together --------------------------------------------------------------------------------------

def render_blocks(paths, summary_shapes=SUMMARY_SHAPES):
    """{block name: its Markdown text} from the JSON files (the summary at summary_shapes, those present)."""
    loaded = []
    for path in paths:
        context, results = load(path)
        loaded.append((path, context, results))
    merged = select(loaded)
    dims = dict(SHAPES)
    dims.update(context_dims([(p, c) for p, c, _ in loaded]))
    return {
        "summary": "\n".join(summary_lines(merged, dims, summary_shapes)) + "\n",
        "tables": "\n".join(tables_lines(merged, dims)) + "\n",
        "appendix": "\n".join(appendix_lines(loaded, merged)) + "\n",
    }


def render(paths):
    blocks = render_blocks(paths)
    return "\n".join(blocks[name] for name in BLOCKS)


def update(markdown_path, blocks):
    try:
        with open(markdown_path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputFault(f"cannot read {markdown_path}: {e.strerror or e}")
    missing = [f"{b} ... {e}" for name, (b, e) in MARKERS.items()
               if name in blocks and not (0 <= text.find(b) < text.find(e))]
    if missing:
        raise InputFault(f"{markdown_path}: no markers " + ", ".join(missing))
    for name in blocks:
        begin, end = MARKERS[name]
        i, j = text.find(begin), text.find(end)
        text = text[: i + len(begin)] + "\n" + blocks[name] + text[j:]
    tmp = markdown_path + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, markdown_path)
    except OSError as e:
        raise InputFault(f"cannot write {markdown_path}: {e.strerror or e}")


def default_paths(files=FILES):
    return [os.path.join(ROOT, "docs", name) for name in files]


def apart_blocks():
    """{block name: the summary of its files alone at every shape, then their list}, for the runs shown apart."""
    blocks = {}
    for name, files in APART_BLOCKS.items():
        rendered = render_blocks(default_paths(files), ALL_SHAPES)
        blocks[name] = rendered["summary"] + "\n" + rendered["appendix"]
    return blocks


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="The generated blocks of docs/results.md (summary, per-shape tables, run contexts) from "
                    "cce_bench / peers JSON files. Regenerate docs/results.md with: "
                    "python3 bench/results_table.py --update docs/results.md")
    parser.add_argument("json", nargs="*",
                        help="Google Benchmark JSON files (default: the committed ones, docs/" + ", docs/".join(FILES)
                             + ")")
    parser.add_argument("--update", metavar="MARKDOWN",
                        help="replace the text between the markers <!-- NAME:begin --> and <!-- NAME:end --> of "
                             f"each block ({', '.join(BLOCKS)}; with the default files also "
                             f"{', '.join(APART_BLOCKS)}: the summary of a run shown apart) in this file "
                             "instead of printing")
    args = parser.parse_args(argv)
    try:
        paths = args.json or default_paths()
        if args.update:
            blocks = render_blocks(paths)
            if not args.json:
                blocks.update(apart_blocks())
            update(args.update, blocks)
        else:
            sys.stdout.write(render(paths))
    except InputFault as e:
        print(f"results_table.py: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
