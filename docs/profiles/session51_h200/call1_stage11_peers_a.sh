#!/usr/bin/env bash
# Session 51, call 1 (one H200; carry [".quack-wheels/xz.00"]: the first of three parts of QuACK and its packages,
# unpacked and xz-compressed here, for call 3; the tree alone is 40 MiB of the 64 a call carries):
# the build; stage 11's tests on one GPU (its step() alone allocates now) while lm128k trains (bench/lm_data.py, whose
# snapshots give lm128k_s0, _s30, _s100); then gemma2_flat's inputs, cce_bench's floor and stage 10 at gemma2_flat and
# lm128k_s0 (call 3's --floor-json), and drop_eps_sweep at lm128k_s30 and lm128k_s100 (dC's error against eps).
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/q /tmp/s51 /tmp/cce-inputs
cp .quack-wheels/xz.00 /tmp/q/ && echo "carried $(du -h /tmp/q/xz.00 | cut -f1)"
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 200 ctest -R "stage11" -j4 --timeout 150 --output-on-failure) > $R/ctest_stage11.log 2>&1
echo "ctest stage11 rc $? at $((SECONDS-T0)) s"; tail -4 $R/ctest_stage11.log
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 400 ]; do sleep 2; done; cat $R/lm_data.rc
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
timeout 120 /tmp/build/bench/cce_bench --shapes=gemma2_flat,lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=/tmp/s51/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s51/bench.json $R/
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
timeout 150 /tmp/build/bench/drop_eps_sweep --shapes=lm128k_s30,lm128k_s100 --lm-data=/tmp/cce-lm-data \
  --exponents=auto,14,16,17,18,20 --corrections=dE+dC --out=$R/drop_eps_sweep.json > $R/drop_eps_sweep.txt 2>&1
echo "sweep rc $? at $((SECONDS-T0)) s"; tail -20 $R/drop_eps_sweep.txt
cd $OUT && tar czf call1.tgz call1
