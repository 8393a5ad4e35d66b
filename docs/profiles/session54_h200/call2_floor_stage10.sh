#!/usr/bin/env bash
# Session 54, call 2 (right after call 1 on the same warm machine: its build, training and inputs in /tmp; carry
# [".quack-wheels/xz4.01"], QuACK's second part; run as CCE_COMMIT=<HEAD> bash <this>): one cce_bench run, the cuBLAS
# floor and stage 10 (loss alone and loss + grad) at every shape of the tables, and stage 06 at gemma2 (loss + grad);
# calls 4 and 5 take its floor for the peers' x floor.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/q /tmp/s54
cp .quack-wheels/xz4.01 /tmp/q/ && echo "carried $(du -h /tmp/q/xz4.01 | cut -f1)"
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
S=gpt2,llama3,gemma2,gemma2_flat,gemma2_softcap,lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout 420 /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^((stage10_plan_per_batch|cublas_floor)/(loss|loss_grad)/|stage06_fused_backward/loss_grad/gemma2/)' \
  --benchmark_out=/tmp/s54/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s54/bench.json $R/
grep -E "_median" $R/bench.txt | awk '{print $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
