#!/usr/bin/env python3
"""Session 54: call 2's cce_bench run (the floor, stage 10 and stage 06) copied to docs/, and the four peers.py runs of
calls 4 and 5 (in turns, on the same machine minutes later) concatenated into one file, for results.md's H200 block
(bench/results_table.py), with the tree named.

    python3 docs/profiles/session54_h200/merge_runs.py    (from the repository root)
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent
TREE = "644edbb"
PEERS = ["call4/peers_dense.json", "call4/peers_sweep.json", "call5/peers_gemma2_llama3.json", "call5/peers_others.json"]


def load(part):
    run = json.loads((HERE / "logs" / part).read_text())
    gpu = run["context"].get("gpu_name", run["context"].get("gpu"))
    if gpu != "NVIDIA H200":
        sys.exit(f"merge_runs.py: {part} ran on {gpu}, not an NVIDIA H200")
    commit = run["context"].get("cce_commit", run["context"].get("commit"))
    if commit != TREE:
        sys.exit(f"merge_runs.py: {part} names commit {commit}, not {TREE}")
    return run


def write(out, doc):
    (DOCS / out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote docs/{out}: {len(doc['benchmarks'])} benchmarks")


bench = load("call2/bench.json")
bench["context"]["cce_merged"] = ("session 54, call 2: one cce_bench run (the floor and stage 10, loss and loss + grad, "
                                  "at every shape; stage 06 at gemma2); the lm shapes from call 1's training on that "
                                  "machine")
write(f"bench_h200_{TREE}.json", bench)

runs = [load(part) for part in PEERS]
context = dict(runs[0]["context"])
context["cce_shapes"] = ", ".join(run["context"]["cce_shapes"] for run in runs)
context["skipped"] = [s for run in runs for s in run["context"].get("skipped", [])]
context["cce_merged"] = ("session 54, calls 4 and 5 on the machine of call 2: four peers.py --interleave runs (eager "
                         "PyTorch, torch.compile, stage 10's op and QuACK in turns, 20 rounds), their benchmarks "
                         "concatenated")
benchmarks = [b for run in runs for b in run["benchmarks"]]
names = [b["name"] for b in benchmarks]
if len(names) != len(set(names)):
    sys.exit("merge_runs.py: a case in two runs")
write(f"bench_peers_h200_{TREE}.json", {"context": context, "benchmarks": benchmarks})
