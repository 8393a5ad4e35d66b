#!/usr/bin/env bash
# Session 46, call 4 (one H200): 1e25f45 (the block lists written into page-locked host memory by their kernel, the
# host counting each tile's pairs from them: no read-back copy left in the decision). Main is 9434a5a: this tree with
# lists_on_host.patch reversed in a copy (the device's git knows only the session's first HEAD). While lm_data.py
# trains lm32k's model: both builds, the whole GPU suite and the mutant g09_lists_not_on_host; then a traced call at
# lm32k's trained data, cce_bench (the floor and stage 10, loss + grad) of both trees in turns: lm32k four rounds,
# gpt2 and gemma2 (generated data) two each; then the op's tests.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "tree: 1e25f45"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session46_h200/lists_on_host.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_main.log)"
(timeout 330 python3 scripts/mutants.py --gpu --only g09_lists_not_on_host --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
while { [ ! -f $R/lm.rc ] || [ ! -f $R/mut.rc ]; } && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc $R/mut.rc 2>/dev/null; tail -3 $R/mutants.txt
timeout 30 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm32k --calls 5 --out $R/timeline_lm32k_trained.txt > $R/timeline.log 2>&1
echo "timeline rc $?"; grep -E "^span|^==" $R/timeline_lm32k_trained.txt
bench() {  # shape round tree [extra args]
  local B=/tmp/build C=1e25f45; [ $3 = main ] && B=/tmp/build-main && C=9434a5a
  CCE_COMMIT=$C timeout 60 $B/bench/cce_bench --shapes=$1 $4 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_$1_$3_$2.json --benchmark_out_format=json > $R/bench_$1_$3_$2.txt 2>&1
  echo "$1 round $2 $3 rc $?"
}
for round in 1 2 3 4; do for tree in main new; do [ $((SECONDS-T0)) -lt 500 ] && bench lm32k $round $tree --lm-data=/tmp/cce-lm-data; done; done
for round in 1 2; do for tree in main new; do [ $((SECONDS-T0)) -lt 510 ] && bench gpt2 $round $tree; done; done
for round in 1 2; do for tree in main new; do [ $((SECONDS-T0)) -lt 520 ] && bench gemma2 $round $tree; done; done
if [ $((SECONDS-T0)) -lt 500 ]; then
  (cd /tmp/build && timeout $((580-(SECONDS-T0))) ctest -R pytorch.op -j4 --timeout 200) > $R/ctest_op.log 2>&1
  echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
