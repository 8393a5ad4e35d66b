#!/usr/bin/env bash
# Session 50, call 1 (one H200): the whole GPU suite on main's HEAD (stage 11's allocations before its collectives,
# session 49, and stage 10's one row gather, this session: neither run in the whole suite yet), while bench/lm_data.py
# trains lm128k's model; compute-sanitizer memcheck of stage 10's dense head at D = 77 and 100 (the gather's 2- and
# 4-byte pieces); then cce_bench (floor and stage 10, loss + grad) at lm128k, gemma2, llama3, two rounds each.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 400 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
for d in 77 100; do for dtype in bf16 fp32; do
  timeout 60 compute-sanitizer --tool memcheck /tmp/build/stages/stage10_plan_per_batch --n 300 --d $d --v 20001 --dtype $dtype \
    --data realistic --plan sparse --dense-head 0.0001 --check --backward --iters 0 > $R/memcheck_head_${d}_$dtype.txt 2>&1
  echo "memcheck D=$d $dtype rc $?: $(grep -E 'ERROR SUMMARY|check +(PASSED|FAILED)|dense head' $R/memcheck_head_${d}_$dtype.txt | tr '\n' ' ')"
done; done
cd $OUT && tar czf call1.tgz call1; cd - > /dev/null
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
