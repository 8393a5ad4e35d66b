#!/usr/bin/env bash
# For the next session (session 34 had too little device time left to start a machine): each kernel's time in one loss + gradient call of stage 10's
# dense chunks at gemma2_flat's shape (flat random data, --plan dense), under ncu (--clock-control none, one pass):
# where the target rows' 1.6 ms go (the sort, the gather of Q's target columns, the third product, target_rows_kernel).
set -o pipefail
T0=$SECONDS
R=$OUT/next; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum --csv \
  /tmp/build/stages/stage10_plan_per_batch --n 8192 --d 2304 --v 256000 --data random --seed 1234 --backward --plan dense \
  --iters 0 > $R/ncu_gemma2_flat.csv 2> $R/ncu.err
echo "ncu rc $? at $((SECONDS-T0)) s; $(grep -c gpu__time_duration $R/ncu_gemma2_flat.csv) kernels"
