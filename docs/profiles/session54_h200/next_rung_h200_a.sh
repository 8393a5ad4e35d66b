#!/usr/bin/env bash
# For a next session (not run in session 54): stage 10's README rung table (stage 09 against stage 10) is still the
# H100's, with session 51's dropped-mass budget. Call A (one H200, ~500 s; run as CCE_COMMIT=<HEAD> bash <this>): the
# build, lm32k's and lm128k's models trained (nothing timed meanwhile), the generated shapes' inputs, then one
# cce_bench run of the floor, stage 09 and stage 10 (loss + grad) at the table's ten shapes. Call B
# (next_rung_h200_b.sh, right after, on the same warm machine) times the peers beside them.
T0=$SECONDS
R=$OUT/rung_a; mkdir -p $R /tmp/cce-inputs
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf rung_a.tgz rung_a; exit 1; }
echo "build $((SECONDS-T0)) s"
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 430 ]; do sleep 2; done; cat $R/lm_data.rc
S=gpt2,llama3,gemma2,gemma2_flat,lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout $((585 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage09_deterministic_products|stage10_plan_per_batch)/loss_grad/' \
  --benchmark_out=/tmp/rung_bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/rung_bench.json $R/bench.json
grep -E "_median" $R/bench.txt | awk '{print $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
cd $OUT && tar czf rung_a.tgz rung_a
