#!/usr/bin/env bash
# Session 40, call 2 (two H200): the whole GPU suite on the tree (stage 11's two-GPU runs among them), then stage 10
# alone at gemma2_flat (its dense plan before the forward, now run as free steps), 20 timed steps.
set -uo pipefail
R=$OUT/call2; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log
grep -c "Skipped\|Not Run" $R/ctest_gpu.log
/tmp/build/stages/stage10_plan_per_batch --backward --n 8192 --d 2304 --v 256000 --data random --iters 20 > $R/stage10_flat.txt 2>&1
grep -E "time|backward  " $R/stage10_flat.txt
