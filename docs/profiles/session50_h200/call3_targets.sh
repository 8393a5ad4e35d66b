#!/usr/bin/env bash
# Session 50, call 3 (one H200): issue 25's targets that recent sessions did not measure, on main's HEAD, in one run:
# bench/lm_data.py trains lm32k's and lm128k's models first (nothing timed meanwhile); then cce_bench, floor and
# stage 10 at gpt2, lm32k, gemma2_flat, lm128k_s30 and lm128k (loss + grad; loss alone at lm128k and gemma2, against
# the floor's forward GEMM), and stage 06 at gemma2 (loss + grad).
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build cce_bench) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 430 ]; do sleep 2; done; cat $R/lm.rc
bench() {  # name shapes filter
  [ $((SECONDS-T0)) -gt 560 ] && { echo "$1 skipped at $((SECONDS-T0)) s"; return; }
  timeout 90 /tmp/build/bench/cce_bench --shapes=$2 --benchmark_filter="$3" \
    --benchmark_out=$R/bench_$1.json --benchmark_out_format=json > $R/bench_$1.txt 2>&1
  echo "$1 rc $?"; grep -E '_median' $R/bench_$1.txt | awk '{print "  ", $1, $2, $3}' | sed 's#/iterations:1/repeats:50/manual_time_median##'
}
bench gpt2_lm32k gpt2,lm32k '^(stage10_plan_per_batch|cublas_floor)/loss_grad/'
bench lm128k lm128k_s30,lm128k '^(stage10_plan_per_batch|cublas_floor)/(loss|loss_grad)/'
bench gemma2_loss gemma2 '^(stage10_plan_per_batch|cublas_floor)/loss/'
bench gemma2_flat gemma2_flat '^(stage10_plan_per_batch|cublas_floor)/loss_grad/'
bench stage06 gemma2 '^(stage06_fused_backward|cublas_floor)/loss_grad/'
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
