#!/usr/bin/env bash
# Session 48, call 1 (one H200): session 47's two prepared steps together on main's tree (dcff1ec):
# rows_in_de_and_unkept_grid.patch = branch wip/s47-rows-in-de (E's rows copied into the token order, in dE's output,
# where the sparse backward runs in several chunks even with that output's slots; dC's owners read them by TMA) and
# branch wip/s47-unkept-grid (dc_unkept_rows as a persistent grid of 8 blocks an SM). The tree on the device has the
# patch applied ("new"); main is a copy with the patch reversed. While bench/lm_data.py trains lm128k's model: both
# builds, the whole GPU suite on new; then cce_bench (floor and stage 10, loss + grad) of both in turns: lm128k three
# rounds (the copy and the grid), gemma2 three (the grid alone: one chunk, no copy), llama3 two.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 400 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session48_h200/rows_in_de_and_unkept_grid.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: main $(tail -1 $R/build_main.log)"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc
S10=/tmp/build/stages/stage10_plan_per_batch
timeout 30 $S10 --load /tmp/cce-lm-data/lm128k --backward --iters 3 > $R/stage10_lm128k_new.txt 2>&1
echo "stage10 lm128k rc $?: $(grep -E 'backward  |kept' $R/stage10_lm128k_new.txt | tr -s ' ' | tr '\n' '|' | cut -c1-400)"
bench() {  # shape round tree [extra]
  local B=/tmp/build; [ $3 = main ] && B=/tmp/build-main
  timeout 60 $B/bench/cce_bench --shapes=$1 $4 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_$1_$3_$2.json --benchmark_out_format=json > $R/bench_$1_$3_$2.txt 2>&1
  echo "$1 $2 $3 rc $? $(grep -E 'stage10.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}') $(grep -E 'stage10.*_median' $R/bench_$1_$3_$2.txt | grep -o 'peak_MB=[0-9.k]*')"
}
for round in 1 2 3; do for tree in main new; do [ $((SECONDS-T0)) -lt 505 ] && bench lm128k $round $tree --lm-data=/tmp/cce-lm-data; done; done
for round in 1 2 3; do for tree in main new; do [ $((SECONDS-T0)) -lt 545 ] && bench gemma2 $round $tree; done; done
for round in 1 2; do for tree in main new; do [ $((SECONDS-T0)) -lt 565 ] && bench llama3 $round $tree; done; done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
