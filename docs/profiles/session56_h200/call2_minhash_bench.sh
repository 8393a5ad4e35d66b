#!/usr/bin/env bash
# Call 2, right after call1_minhash_suite.sh on the same warm machine:
# cce_bench's floor and stage 10 (loss + grad) of main's tree and the branch in turns,
# three rounds, at lm128k, lm32k, gpt2, llama3, gemma2 (the kept share and eps are in each case's counters).
T0=$SECONDS
R=$OUT/minhash_b; mkdir -p $R
F='^(cublas_floor|stage10_plan_per_batch)/loss_grad/'
for round in 1 2 3; do
  for tree in main branch; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout $((585 - (SECONDS-T0))) $B/bench/cce_bench --shapes=lm128k,lm32k,gpt2,llama3,gemma2 --lm-data=/tmp/cce-lm-data \
      --benchmark_filter="$F" --benchmark_out=$R/bench_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "$tree round $round rc $? at $((SECONDS-T0)) s"
    grep -E "stage10.*_median" $R/bench_${tree}_$round.txt | awk '{print $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
  done
done
P=docs/profiles/session55_h200/grouping_probe.py  # the branch's order beside the probe's (its row "stage10_grouping")
for m in lm128k lm32k; do
  timeout $((590 - (SECONDS-T0))) python3 $P /tmp/cce-lm-data/$m --label $m --log2-eps -13 --out $R/grouping_$m.json >> $R/probe.txt 2>&1
done
grep "as stage 10 chooses" $R/probe.txt
cd $OUT && tar czf minhash_b.tgz minhash_b
