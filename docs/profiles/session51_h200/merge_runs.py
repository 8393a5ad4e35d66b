#!/usr/bin/env python3
"""Session 51: the runs of calls 1, 4 and 5 (cce_bench) and of calls 3, 4 and 5 (peers.py), all on one warm machine,
each kind concatenated into one file for results.md's H200 block (bench/results_table.py), with the tree named.

    python3 docs/profiles/session51_h200/merge_runs.py    (from the repository root)
"""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent.parent
TREE = "430eaf8"
NOTE = ("the device's copy reported HEAD 062f883 with 430eaf8's change to stage 11 uncommitted (each call's status.txt "
        "in docs/profiles/session51_h200/logs); the timed code is 430eaf8's, whose stage 10 is 4bde380's device code")


def merge(parts, out, what):
    first = json.loads((HERE / "logs" / parts[0]).read_text())
    shapes, benchmarks = [], []
    for part in parts:
        run = json.loads((HERE / "logs" / part).read_text())
        assert run["context"].get("gpu_name", run["context"].get("gpu")) == "NVIDIA H200", part
        shapes.append(run["context"]["cce_shapes"])
        benchmarks += run["benchmarks"]
    context = dict(first["context"])
    context["cce_shapes"] = ", ".join(shapes)
    context["cce_commit" if "cce_commit" in context else "commit"] = TREE
    context["cce_merged"] = what
    context["cce_commit_note"] = NOTE
    names = [b["name"] for b in benchmarks]
    assert len(names) == len(set(names)), "a case in two runs"
    (DOCS / out).write_text(json.dumps({"context": context, "benchmarks": benchmarks}, indent=1) + "\n")
    print(f"wrote docs/{out}: {len(benchmarks)} benchmarks from {', '.join(parts)}")


merge(["call1/bench.json", "call4/bench.json", "call5/bench.json"], f"bench_h200_{TREE}.json",
      "session 51, calls 1, 4 and 5 on one machine: three cce_bench runs (the floor and stage 10, loss + grad), their "
      "benchmarks concatenated; lm128k's rows come from call 1's training on that machine")
merge(["call3/peers.json", "call4/peers.json", "call5/peers.json"], f"bench_peers_h200_{TREE}.json",
      "session 51, calls 3, 4 and 5 on one machine: three peers.py --interleave runs (eager PyTorch, torch.compile, "
      "stage 10's op and QuACK in turns; 30 rounds in call 3, 20 in calls 4 and 5), their benchmarks concatenated")
