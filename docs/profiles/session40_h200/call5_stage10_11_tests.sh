#!/usr/bin/env bash
# Session 40, call 5 (two H200): after stage 11 takes --dense-chunk-rows (DropSettings), stage 10's and 11's tests,
# the new plan_2gpu_bf16_forced_dense_chunks among them.
set -uo pipefail
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
(cd /tmp/build && ctest -R "stage11|stage10|PlanPerBatch" -j4 --timeout 300 > $R/ctest_stage10_11.log 2>&1)
grep -E "tests passed|\(Failed\)|Total Test" $R/ctest_stage10_11.log
/tmp/build/stages/stage11_sharded_vocabulary --check --backward --iters 0 --compare-single --gpus 2 --n 300 --d 200 \
  --v 20001 --plan dense --dense-chunk-rows 128 --reduction none --upstream random --softcap 30 --ignore-frac 0.1 \
  > $R/forced_dense_chunks.txt 2>&1
grep -E "backward  |dE|dC|check|plan  " $R/forced_dense_chunks.txt
