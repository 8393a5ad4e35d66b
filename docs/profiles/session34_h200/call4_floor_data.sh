#!/usr/bin/env bash
# Session 34, call 4 (a fresh machine; carries QuACK's wheel part 00; 01 follows in a call of its own, as the tree and a part fill the 64 MiB): build; lm128k's trained data; the
# inputs of gemma2_flat; the floor and stage 10 by cce_bench at gemma2_flat and lm128k_s0 (the floor JSON for call 5).
set -o pipefail
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/q /tmp/s34
cp .quack-wheels/part.0* /tmp/q/  # part.00 here; part.01 comes with a one-line call between this one and call 5
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
mkdir -p /tmp/cce-inputs
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done
cat $R/lm_data.rc 2>/dev/null
CCE_COMMIT=$(git rev-parse --short HEAD) timeout 150 /tmp/build/bench/cce_bench --shapes=gemma2_flat,lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=/tmp/s34/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s34/bench.json $R/
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
echo "total $((SECONDS-T0)) s"
