#!/usr/bin/env bash
# Session 34, call 3 (a fresh machine), on wip/dense-target-rows merged with main: the GPU mutant
# g10_target_term_not_in_de (it did not build in call 2: nvcc rejects an unused variable; mended in tests/mutants.txt);
# lm128k's trained data written beside it; then the floor and stage 10 (cce_bench) and eager PyTorch with stage 10's op
# (peers.py, --floor-json of the same call) at gemma2_flat, lm128k_s0 and lm128k_s30: errors and times against eager's.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
timeout 300 python3 scripts/mutants.py --gpu --only g10_target_term_not_in_de --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $?: $(grep -E 'caught|survived|did not build' $R/mutants.txt | tail -2 | tr '\n' ' ' | cut -c1-300)"
mkdir -p /tmp/cce-inputs
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 380 ]; do sleep 2; done
cat $R/lm_data.rc 2>/dev/null
SHAPES=gemma2_flat; [ -f /tmp/cce-lm-data/lm128k_s30/targets.npy ] && SHAPES=gemma2_flat,lm128k_s0,lm128k_s30
CCE_COMMIT=$(git rev-parse --short HEAD) timeout 150 /tmp/build/bench/cce_bench --shapes=$SHAPES --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=$R/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-220
PYTHONUNBUFFERED=1 timeout $((585-(SECONDS-T0))) python3 bench/peers.py --shapes $SHAPES --lm-data /tmp/cce-lm-data \
  --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad --reps 10 --cce-python /tmp/build/python \
  --floor-json $R/bench.json --out $R/peers.json > $R/peers.log 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"
grep -E " ms |err" $R/peers.log | cut -c1-200 | head -20
echo "total $((SECONDS-T0)) s"
