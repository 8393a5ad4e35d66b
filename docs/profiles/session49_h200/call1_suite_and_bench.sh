#!/usr/bin/env bash
# Session 49, call 1 (one H200): the whole GPU suite on main's HEAD (4d5dd7a, session 48's last device-code changes
# not yet run on a GPU: the narrowed copy rule, the GPU test's new assertion, run_backward_plan's one call), while
# bench/lm_data.py trains lm128k's model; then cce_bench (floor and stage 10, loss + grad) at lm128k, gemma2, llama3,
# two rounds each.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 400 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 430 ]; do sleep 2; done; cat $R/lm.rc
bench() {  # shape round [extra]
  timeout 60 /tmp/build/bench/cce_bench --shapes=$1 $3 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_$1_$2.json --benchmark_out_format=json > $R/bench_$1_$2.txt 2>&1
  echo "$1 $2 rc $? $(grep -E 'stage10.*_median' $R/bench_$1_$2.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_$1_$2.txt | awk '{print $2}') $(grep -E 'stage10.*_median' $R/bench_$1_$2.txt | grep -o 'peak_MB=[0-9.k]*')"
}
for round in 1 2; do
  [ $((SECONDS-T0)) -lt 540 ] && [ -d /tmp/cce-lm-data/lm128k ] && bench lm128k $round --lm-data=/tmp/cce-lm-data
  [ $((SECONDS-T0)) -lt 555 ] && bench gemma2 $round
  [ $((SECONDS-T0)) -lt 570 ] && bench llama3 $round
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
