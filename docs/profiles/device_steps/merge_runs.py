#!/usr/bin/env python3
"""One session's run for docs/results.md (bench/results_table.py): its cce_bench file copied to docs/, its peers.py
files (in turns, on the same machine minutes later) concatenated into one, each checked for the GPU and the tree.

    python3 docs/profiles/device_steps/merge_runs.py --gpu "NVIDIA H100 80GB HBM3" --tree 3ae9c50 \\
        --logs docs/profiles/session64_h100/logs --bench call2/bench.json --bench-out bench_h100_3ae9c50.json \\
        --bench-note "..." --peers call3/peers_gen.json call4/peers_gen2.json \\
        --peers-out bench_peers_h100_3ae9c50.json --peers-note "..."
"""
import argparse
import json
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent.parent


def load(logs, part, gpu, tree):
    path = Path(logs) / part
    try:
        run = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        sys.exit(f"merge_runs.py: {path}: {exc}")
    context = run["context"]
    ran_on = context.get("gpu_name", context.get("gpu"))
    if ran_on != gpu:
        sys.exit(f"merge_runs.py: {part} ran on {ran_on}, not an {gpu}")
    commit = context.get("cce_commit", context.get("commit"))
    if commit != tree:
        sys.exit(f"merge_runs.py: {part} names commit {commit}, not {tree}")
    return run


def write(name, doc):
    (DOCS / name).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote docs/{name}: {len(doc['benchmarks'])} benchmarks")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", required=True)
    p.add_argument("--tree", required=True)
    p.add_argument("--logs", required=True, help="the session's log folder")
    p.add_argument("--bench", required=True, help="cce_bench's file, relative to --logs")
    p.add_argument("--bench-out", required=True)
    p.add_argument("--bench-note", required=True)
    p.add_argument("--peers", nargs="+", required=True, help="peers.py's files, relative to --logs")
    p.add_argument("--peers-out", required=True)
    p.add_argument("--peers-note", required=True)
    args = p.parse_args(argv)

    bench = load(args.logs, args.bench, args.gpu, args.tree)
    bench["context"]["cce_merged"] = args.bench_note
    write(args.bench_out, bench)

    runs = [load(args.logs, part, args.gpu, args.tree) for part in args.peers]
    context = dict(runs[0]["context"])
    context["cce_shapes"] = ", ".join(run["context"]["cce_shapes"] for run in runs)
    context["skipped"] = [s for run in runs for s in run["context"].get("skipped", [])]
    context["cce_merged"] = args.peers_note
    benchmarks = [b for run in runs for b in run["benchmarks"]]
    names = [b["name"] for b in benchmarks]
    if len(names) != len(set(names)):
        sys.exit("merge_runs.py: a case in two runs")
    write(args.peers_out, {"context": context, "benchmarks": benchmarks})


if __name__ == "__main__":
    main()
