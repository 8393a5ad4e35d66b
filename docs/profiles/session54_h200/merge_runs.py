#!/usr/bin/env python3
"""Session 54: call 2's cce_bench run (the floor, stage 10 and stage 06) copied to docs/, and the four peers.py runs of
calls 4 and 5 (in turns, on the same machine minutes later) concatenated into one file, for results.md's H200 block
(bench/results_table.py), with the tree named: ../device_steps/merge_runs.py with this session's files.

    python3 docs/profiles/session54_h200/merge_runs.py    (from the repository root)
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "device_steps"))
import merge_runs  # noqa: E402  (device_steps/merge_runs.py)

TREE = "644edbb"
merge_runs.main([
    "--gpu", "NVIDIA H200", "--tree", TREE, "--logs", str(HERE / "logs"),
    "--bench", "call2/bench.json", "--bench-out", f"bench_h200_{TREE}.json",
    "--bench-note", "session 54, call 2: one cce_bench run (the floor and stage 10, loss and loss + grad, at every shape; "
                    "stage 06 at gemma2); the lm shapes from call 1's training on that machine",
    "--peers", "call4/peers_dense.json", "call4/peers_sweep.json", "call5/peers_gemma2_llama3.json",
    "call5/peers_others.json", "--peers-out", f"bench_peers_h200_{TREE}.json",
    "--peers-note", "session 54, calls 4 and 5 on the machine of call 2: four peers.py --interleave runs (eager "
                    "PyTorch, torch.compile, stage 10's op and QuACK in turns, 20 rounds), their benchmarks concatenated"])
