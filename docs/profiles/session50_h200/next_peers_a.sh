#!/usr/bin/env bash
# For a next session (one H200), part A of two calls back to back (the machine stays warm; /tmp survives): the peers
# in turns with stage 10's op at the two shapes where results.md's H200 table puts the fastest peer closest to stage 10
# (gemma2_flat: the op 44.64 ms against QuACK's 46.09 in turns at 856ed84; lm128k_s0: 19.12 against 20.20).
# Before: ../shared/tools/quack-wheels.sh .quack-wheels (here), then run with carry [".quack-wheels/cu13.00"].
# This part: the build, lm128k's training (its snapshots give lm128k_s0), gemma2_flat's inputs, and cce_bench's floor
# and stage 10 at both shapes into /tmp/s51/bench.json (part B's --floor-json).
T0=$SECONDS
R=$OUT/peers_a; mkdir -p $R /tmp/q /tmp/s51 /tmp/cce-inputs
cp .quack-wheels/cu13.00 /tmp/q/ && echo "carried $(du -h /tmp/q/cu13.00 | cut -f1)"
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 400 ]; do sleep 2; done; cat $R/lm_data.rc
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
timeout 120 /tmp/build/bench/cce_bench --shapes=gemma2_flat,lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=/tmp/s51/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s51/bench.json $R/
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
cd $OUT && tar czf peers_a.tgz peers_a
