#!/usr/bin/env bash
# Session 64: call 2's cce_bench run and calls 3 and 4's peers.py runs, on one H100, into docs/ for results.md
# (bench/results_table.py's FILES). Run from the repository root.
python3 docs/profiles/device_steps/merge_runs.py --gpu "NVIDIA H100 80GB HBM3" --tree 3ae9c50 \
  --logs docs/profiles/session64_h100/logs --bench call2/bench.json --bench-out bench_h100_3ae9c50.json \
  --bench-note "session 64, call 2: one cce_bench run (the floor and stage 10, loss and loss + grad, at every shape; stage 06 at gemma2_flat); the lm shapes from call 1's training on that machine" \
  --peers call3/peers_gen.json call3/peers_flat.json call3/peers_lm.json call4/peers_gen2.json call4/peers_snap.json \
  --peers-out bench_peers_h100_3ae9c50.json \
  --peers-note "session 64, calls 3 and 4 on the machine of call 2: five peers.py --interleave runs (eager PyTorch, torch.compile, stage 10's op, Cut Cross-Entropy and Liger in turns, 15 rounds), their benchmarks concatenated"
