#!/usr/bin/env python3
"""ladder_table.py: the ladder 07 → 08 → 09 → 10 as Markdown tables, from cce_bench (and bench/peers.py) JSON
files: per shape, loss + gradient median ms with the fastest and slowest repetition, peak MB beyond the inputs,
dE and dC relative L2 errors, the kept share of the backward's pairs, the eps the drop stages decided with, and
stage 10's plan; under each table, the file each row comes from.

    python3 bench/ladder_table.py docs/bench_h100_79c303f.json docs/bench_peers_h100_79c303f.json
    python3 bench/ladder_table.py --shapes lm128k_s0,lm128k_s30 docs/bench_h100_79c303f.json ...
    python3 bench/ladder_table.py --wide docs/bench_h100_79c303f.json ...   # a row per shape: time, errors, kept

A case found in several files is taken from the last file given. Stage 10's plan is not a counter of the files:
it is "dense" where more than a third of the pairs are kept (kDenseAboveKept in
stages/10_plan_per_batch/plan_per_batch.h; the dense plan then reports every pair kept), else "sparse".
Python 3 standard library only. Exit status 2, with a one-line message, on a file it cannot read.
"""
import argparse
import json
import os
import sys

import results_table as rt  # fmt_eps: the eps as the docs write it

IMPLS = ["cublas_floor", "stage07_filter_sort", "stage08_drop_before_recompute", "stage09_deterministic_products",
         "stage10_plan_per_batch", "peer_torch_eager", "peer_torch_compile", "peer_cce", "peer_cce_nofilter",
         "peer_liger"]
SHAPES = ["gpt2", "llama3", "gemma2", "gemma2_flat", "lm32k", "lm128k_s0", "lm128k_s30", "lm128k_s100",
          "lm128k_s300", "lm128k"]
DENSE_ABOVE_KEPT = 1.0 / 3.0  # kDenseAboveKept, stages/10_plan_per_batch/plan_per_batch.h
STAGE10 = "stage10_plan_per_batch"


class InputFault(Exception):
    """A file that cannot be read: one line, exit status 2."""


def load(paths):
    """{(shape, mode, impl): {aggregate name: entry, "file": basename}}; a later file wins."""
    rows = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                benchmarks = json.load(f)["benchmarks"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise InputFault(f"cannot read {path}: {e}")
        seen = {}
        for b in benchmarks:
            if "aggregate_name" in b and isinstance(b.get("run_name"), str) and b["run_name"].count("/") >= 2:
                impl, mode, shape = b["run_name"].split("/")[:3]
                seen.setdefault((shape, mode, impl), {"file": os.path.basename(path)})[b["aggregate_name"]] = b
        rows.update(seen)
    return rows


def fmt_ms(x):
    return f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 100 else f"{x:.1f}"


def plan(impl, median):
    if impl != STAGE10 or "kept_frac" not in median:
        return "–"
    return "dense" if median["kept_frac"] > DENSE_ABOVE_KEPT else "sparse"


def table(rows, shapes):
    err = lambda x: "–" if not x else f"{x:.2e}"
    out = ["| shape | implementation | loss+grad ms (min–max) | peak MB | dE err | dC err | kept | eps | plan |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    files = {}
    for shape in shapes:
        for impl in IMPLS:
            case = rows.get((shape, "loss_grad", impl))
            if not case or "median" not in case:
                continue
            files.setdefault(case["file"], []).append(impl)
            m = case["median"]
            spread = (f" ({fmt_ms(case['min']['real_time'])}–{fmt_ms(case['max']['real_time'])})"
                      if "min" in case and "max" in case else "")
            kept = m.get("kept_frac")
            eps = m.get("drop_eps_log2")
            out.append(f"| {shape} | {impl} | {fmt_ms(m['real_time'])}{spread} | {m.get('peak_MB', 0):.0f} | "
                       f"{err(m.get('dE_rel_err'))} | {err(m.get('dC_rel_err'))} | "
                       f"{'–' if kept is None else f'{100 * kept:.1f}%'} | {rt.fmt_eps(eps)} "
                       f"| {plan(impl, m)} |")
    return "\n".join(out + ["", sources(files)])


SHORT = {"cublas_floor": "floor", "peer_torch_eager": "eager", "peer_torch_compile": "torch.compile",
         "peer_cce": "CCE", "peer_cce_nofilter": "CCE no filter", "peer_liger": "Liger"}


def short(impl):
    return impl[5:7] if impl.startswith("stage") else SHORT.get(impl, impl)


def sources(files):
    """'From: `a.json` (floor, 07, 08); `b.json` (eager, ...).' in IMPLS order."""
    names = lambda impls: ", ".join(short(i) for i in IMPLS if i in impls)
    return "From: " + "; ".join(f"`{f}` ({names(set(i))})" for f, i in files.items()) + "."


def wide(rows, shapes):
    """Three tables with a row per shape: loss+grad ms (min–max); dE / dC error; kept share, eps and plan."""
    impls = [i for i in IMPLS if any((s, "loss_grad", i) in rows for s in shapes)]
    stages = [i for i in impls if i.startswith("stage")]
    files = {}

    def case(shape, impl):
        c = rows.get((shape, "loss_grad", impl))
        if c and "median" in c:
            files.setdefault(c["file"], []).append(impl)
            return c
        return None

    def head(cols):
        return ["| shape | " + " | ".join(cols) + " |", "| --- |" + " ---: |" * len(cols)]

    timing = ["Loss + gradient, ms: median (fastest–slowest repetition).", ""] + head([short(i) for i in impls])
    errors = ["dE / dC relative L2 error against fp32.", ""] + head([short(i) for i in impls if i != "cublas_floor"])
    kept = ["Pairs (tiles) of the backward recomputed, and the eps the stage decided with (stage 10: and its plan).",
            ""] + head([short(i) for i in stages])
    for s in shapes:
        t, e, k = [], [], []
        for impl in impls:
            c = case(s, impl)
            m = c["median"] if c else None
            if m is None:
                t.append("–")
                if impl != "cublas_floor":
                    e.append("–")
                if impl in stages:
                    k.append("–")
                continue
            spread = f" ({fmt_ms(c['min']['real_time'])}–{fmt_ms(c['max']['real_time'])})" if "min" in c and "max" in c else ""
            t.append(f"{fmt_ms(m['real_time'])}{spread}")
            if impl != "cublas_floor":
                e.append(f"{m['dE_rel_err']:.2e} / {m['dC_rel_err']:.2e}" if "dE_rel_err" in m else "–")
            if impl in stages:
                what = [f"{100 * m['kept_frac']:.1f}%"] if "kept_frac" in m else []
                what += [rt.fmt_eps(m['drop_eps_log2'])] if "drop_eps_log2" in m else []
                what += [plan(impl, m)] if impl == STAGE10 else []
                k.append(", ".join(what) or "–")
        timing.append(f"| {s} | " + " | ".join(t) + " |")
        errors.append(f"| {s} | " + " | ".join(e) + " |")
        kept.append(f"| {s} | " + " | ".join(k) + " |")
    return "\n".join(timing + [""] + errors + [""] + kept + ["", sources(files)])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+", help="cce_bench / peers.py JSON files; a later file wins")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated, in this order (default: %(default)s)")
    parser.add_argument("--wide", action="store_true", help="three tables with a row per shape (time, errors, kept)")
    args = parser.parse_args(argv)
    try:
        rows = load(args.json)
    except InputFault as e:
        print(f"ladder_table.py: error: {e}", file=sys.stderr)
        return 2
    shapes = [s for s in args.shapes.split(",") if s]
    print(wide(rows, shapes) if args.wide else table(rows, shapes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
