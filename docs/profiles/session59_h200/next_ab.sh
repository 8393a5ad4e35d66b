#!/usr/bin/env bash
# For a next session (written in session 59, not run), right after next_suite.sh on the same warm machine (its builds
# and training in /tmp): cce_bench's stage 10 (loss + grad) of main's tree and the branch in turns, three rounds, at
# lm128k, lm32k, gpt2, llama3, gemma2, the floor in round 1 (about 280 s; cce_bench's warm-up calls are earlier
# batches of the same inputs, so the branch's timed calls keep the order: the time of one pass over C, not what a
# kept order costs in a training, which next_train.sh measures); then the GPU mutants of the order.
T0=$SECONDS
R=$OUT/ab; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
stage10_rounds 3 lm128k,lm32k,gpt2,llama3,gemma2 main=/tmp/build-main next=/tmp/build
# The loss alone (stage 03's forward, no sort) against the floor's forward GEMM at lm32k, issue 25's last 3% target.
timeout 60 /tmp/build/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/loss/' --benchmark_out=$R/bench_loss_lm32k.json \
  --benchmark_out_format=json > $R/bench_loss_lm32k.txt 2>&1
echo "loss alone rc $?: $(grep -E '_median' $R/bench_loss_lm32k.txt | grep -oE '^[a-z0-9_]+|manual_time_median +[0-9.]+' | paste -sd' ')"
cd $OUT && tar czf ab.tgz ab && cd - > /dev/null
timeout $((580 - (SECONDS-T0))) python3 scripts/mutants.py --gpu --build-dir /tmp/build-mut \
  --only g10_next_batch_sorts_the_vocabulary --only g08_sort_key_ascending > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -5 $R/mutants.txt
cd $OUT && tar czf ab.tgz ab
