#!/usr/bin/env bash
# Session 47, call 4 (one H200, the session's last 324 s of device time): the change as committed (rows_in_de.patch on
# d01db85): with grouped token blocks, stage 10's sparse plan copies E's rows into the token order, into the bf16 dE
# output, and dC's owners read them by TMA; no S tiles spill into dE's output then. Build, then stage 09's, 10's and
# 11's tests; then, if time is left, cce_bench (floor and stage 10, loss + grad) at gemma2 against main (the patch
# reversed) in turns.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session47_h200/rows_in_de.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout $((285-(SECONDS-T0))) ctest -R "stage09|stage10|stage11|DeterministicProducts|PlanPerBatch|KeptProducts|ShardedVocabulary" -j5 --timeout 150) > $R/ctest_09_10_11.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_09_10_11.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_09_10_11.log | head
cd $OUT && tar czf call4.tgz call4; cd - > /dev/null
bench() {  # round tree
  local B=/tmp/build; [ $2 = main ] && B=/tmp/build-main
  timeout 20 $B/bench/cce_bench --shapes=gemma2 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_gemma2_$2_$1.json --benchmark_out_format=json > $R/bench_gemma2_$2_$1.txt 2>&1
  echo "gemma2 $1 $2 rc $? $(grep -E 'stage10.*_median' $R/bench_gemma2_$2_$1.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_gemma2_$2_$1.txt | awk '{print $2}')"
}
for round in 1 2; do for tree in main new; do [ $((SECONDS-T0)) -lt 290 ] && bench $round $tree; done; done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
