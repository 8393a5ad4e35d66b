#!/usr/bin/env bash
# Session 57, call 4, right after call3_rarest_suite.sh on the same warm machine (its builds and training in /tmp):
# cce_bench's stage 10 (loss + grad) of main's tree and the branch in turns, three rounds, at lm128k, lm32k, gpt2,
# llama3, gemma2, with the cuBLAS floor in the first round (the kept share and eps are in each case's counters).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
for round in 1 2 3; do
  F='^stage10_plan_per_batch/loss_grad/'; [ $round = 1 ] && F='^(cublas_floor|stage10_plan_per_batch)/loss_grad/'
  for tree in main rarest; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout $((585 - (SECONDS-T0))) $B/bench/cce_bench --shapes=lm128k,lm32k,gpt2,llama3,gemma2 --lm-data=/tmp/cce-lm-data \
      --benchmark_filter="$F" --benchmark_out=$R/bench_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "$tree round $round rc $? at $((SECONDS-T0)) s"
    grep -E "_median" $R/bench_${tree}_$round.txt | grep -oE "^[a-z0-9_]+/loss_grad/[a-z0-9_]+|manual_time_median +[0-9.]+|drop_eps_log2=[-0-9.]+|kept_frac=[0-9.]+" | paste -sd' ' | sed 's/ \([a-z0-9_]*\/loss_grad\)/\n\1/g'
  done
done
cd $OUT && tar czf call4.tgz call4
