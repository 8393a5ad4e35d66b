#!/usr/bin/env bash
# Session 47, call 3 (one H200): two questions at lm128k's trained data, where stage 10's sparse backward runs in four
# chunks and dC's owners are each chunk's longest kernel. (1) E's rows copied into the grouped token order, so that
# dC's owners read them by TMA (e_rows_in_token_order.patch on d01db85, tree "eg"; session 23 measured that path 11-13%
# faster per kernel at lm32k): the stage 09/10/11 tests on it while bench/lm_data.py trains lm128k's model, then
# cce_bench (floor and stage 10, loss + grad) of main and eg in turns at lm128k, gemma2 and llama3, and a traced call
# of each at lm128k. (2) The chunks themselves: main's stage 10 executable at lm128k with its default slots (four
# chunks) and with --slot-mb 400 (one chunk), in turns, and a traced call with --slot-mb 400.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 400 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-eg; mkdir /tmp/src-eg; tar cf - --exclude=.git . | tar xf - -C /tmp/src-eg
(cd /tmp/src-eg && git apply docs/profiles/session47_h200/e_rows_in_token_order.patch && cmake -S . -B /tmp/build-eg $CM > /dev/null && ninja -C /tmp/build-eg) > $R/build_eg.log 2>&1 &
BE=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
wait $BE; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_eg.log)"
(cd /tmp/build-eg && ctest -R "stage09|stage10|stage11|DeterministicProducts|PlanPerBatch|KeptProducts|ShardedVocabulary" -j4 --timeout 200) > $R/ctest_eg.log 2>&1
echo "eg tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_eg.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_eg.log | head
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc
bench() {  # shape round tree [extra]
  local B=/tmp/build; [ $3 = eg ] && B=/tmp/build-eg
  timeout 60 $B/bench/cce_bench --shapes=$1 $4 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_$1_$3_$2.json --benchmark_out_format=json > $R/bench_$1_$3_$2.txt 2>&1
  echo "$1 $2 $3 rc $? $(grep -E 'stage10.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}') $(grep -E 'stage10.*_median' $R/bench_$1_$3_$2.txt | grep -o 'peak_MB=[0-9.k]*')"
}
for round in 1 2 3; do for tree in main eg; do [ $((SECONDS-T0)) -lt 470 ] && bench lm128k $round $tree --lm-data=/tmp/cce-lm-data; done; done
S10=/tmp/build/stages/stage10_plan_per_batch
for round in 1 2; do for slots in 0 400; do
  [ $((SECONDS-T0)) -lt 500 ] || continue
  timeout 40 $S10 --load /tmp/cce-lm-data/lm128k --backward --iters 30 --slot-mb $slots > $R/slots_${slots}_$round.txt 2>&1
  echo "slot-mb $slots round $round rc $?: $(grep -E 'time|kept tiles|memory' $R/slots_${slots}_$round.txt | tr -s ' ' | tr '\n' '|')"
done; done
for round in 1 2; do for tree in main eg; do [ $((SECONDS-T0)) -lt 520 ] && bench gemma2 $round $tree; done; done
for round in 1 2; do for tree in main eg; do [ $((SECONDS-T0)) -lt 535 ] && bench llama3 $round $tree; done; done
if [ $((SECONDS-T0)) -lt 545 ]; then
  timeout 25 python3 bench/stage_timeline.py /tmp/build-eg/python /tmp/cce-lm-data/lm128k --calls 4 --out $R/timeline_eg.txt > $R/timeline_eg.log 2>&1
  timeout 25 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm128k --calls 4 --flags "--slot-mb 400" --out $R/timeline_one_chunk.txt > $R/timeline_one_chunk.log 2>&1
  grep -E "^span|^==" $R/timeline_eg.txt $R/timeline_one_chunk.txt
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
