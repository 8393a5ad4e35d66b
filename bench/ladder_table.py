#!/usr/bin/env python3
"""ladder_table.py: the ladder 07 → 08 → 09 → 10 as one Markdown table, from
cce_bench (and bench/peers.py) JSON files: per shape, loss + gradient median
ms with the fastest and slowest repetition, peak MB beyond the inputs, dE and
dC relative L2 errors, the kept tiles and the eps the drop stages decided with.

    python3 bench/ladder_table.py docs/ladder/*.json

A case found in several files is taken from the last file given.
Python 3 standard library only.
"""
import json
import sys

IMPLS = ["cublas_floor", "stage07_filter_sort", "stage08_drop_before_recompute", "stage09_deterministic_products",
         "stage10_plan_per_batch", "peer_torch_eager", "peer_torch_compile", "peer_cce", "peer_liger"]
SHAPES = ["gpt2", "llama3", "gemma2", "lm32k", "lm128k"]


def load(paths):
    rows = {}
    for path in paths:
        with open(path) as f:
            for b in json.load(f)["benchmarks"]:
                if "aggregate_name" in b:
                    impl, mode, shape = b["run_name"].split("/")[:3]
                    rows.setdefault((shape, mode, impl), {})[b["aggregate_name"]] = b
    return rows


def table(rows):
    err = lambda x: "–" if not x else f"{x:.2e}"
    out = ["| shape | implementation | loss+grad ms (min–max) | peak MB | dE err | dC err | kept tiles | eps |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for shape in SHAPES:
        for impl in IMPLS:
            case = rows.get((shape, "loss_grad", impl))
            if not case or "median" not in case:
                continue
            m = case["median"]
            spread = f" ({case['min']['real_time']:.2f}–{case['max']['real_time']:.2f})" if "min" in case and "max" in case else ""
            kept = m.get("kept_frac")
            eps = m.get("drop_eps_log2")
            out.append(f"| {shape} | {impl} | {m['real_time']:.2f}{spread} | {m.get('peak_MB', 0):.0f} | "
                       f"{err(m.get('dE_rel_err'))} | {err(m.get('dC_rel_err'))} | "
                       f"{'–' if kept is None else f'{100 * kept:.1f}%'} | {'–' if eps is None else f'2^{int(eps)}'} |")
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    print(table(load(sys.argv[1:])))
