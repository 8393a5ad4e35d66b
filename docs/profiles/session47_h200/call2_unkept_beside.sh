#!/usr/bin/env bash
# Session 47, call 2 (one H200): dC's rows of the tiles without a kept pair (dc_unkept_rows) on a stream of their own,
# beside the recomputation and the products, with a grid of one block per SM walking the items (unkept_rows_beside.patch
# on d01db85). Three trees: main (d01db85: the patch reversed), new (one block per SM), new8 (eight blocks per SM).
# While bench/lm_data.py trains lm128k's model: the builds, then stage 09's and 10's tests on the new tree; after it,
# cce_bench (the floor and stage 10, loss + grad) of the three trees in turns at gemma2, llama3 (generated data) and
# lm128k's trained data, and a traced call of the new tree at gemma2 and lm128k.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 400 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
P=docs/profiles/session47_h200/unkept_rows_beside.patch
for t in main new8; do rm -rf /tmp/src-$t; mkdir /tmp/src-$t; tar cf - --exclude=.git . | tar xf - -C /tmp/src-$t; done
(cd /tmp/src-main && git apply -R $P && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
BM=$!
(cd /tmp/src-new8 && sed -i 's/constexpr int kUnkeptBlocksPerSm = 1;/constexpr int kUnkeptBlocksPerSm = 8;/' stages/09_deterministic_products/kept_products.cu && grep -c "kUnkeptBlocksPerSm = 8" stages/09_deterministic_products/kept_products.cu && cmake -S . -B /tmp/build-new8 $CM > /dev/null && ninja -C /tmp/build-new8 cce_bench) > $R/build_new8.log 2>&1 &
B8=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
wait $BM $B8; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_main.log) | $(tail -1 $R/build_new8.log)"
(cd /tmp/build && ctest -R "stage09|stage10|DeterministicProducts|PlanPerBatch|KeptProducts" -j4 --timeout 200) > $R/ctest_09_10.log 2>&1
echo "tests 09/10 rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_09_10.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_09_10.log | head
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc
bench() {  # shape round tree [extra]
  local B=/tmp/build; [ $3 = main ] && B=/tmp/build-main; [ $3 = new8 ] && B=/tmp/build-new8
  timeout 60 $B/bench/cce_bench --shapes=$1 $4 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_$1_$3_$2.json --benchmark_out_format=json > $R/bench_$1_$3_$2.txt 2>&1
  echo "$1 $2 $3 rc $? $(grep -E 'stage10.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_$1_$3_$2.txt | awk '{print $2}')"
}
for round in 1 2; do for tree in main new new8; do [ $((SECONDS-T0)) -lt 480 ] && bench gemma2 $round $tree; done; done
for round in 1 2; do for tree in main new new8; do [ $((SECONDS-T0)) -lt 500 ] && bench llama3 $round $tree; done; done
for round in 1 2; do for tree in main new new8; do [ $((SECONDS-T0)) -lt 530 ] && bench lm128k $round $tree --lm-data=/tmp/cce-lm-data; done; done
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
timeout 40 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-inputs/gemma2 /tmp/cce-lm-data/lm128k --calls 5 --out $R/timeline_new.txt > $R/timeline.log 2>&1
echo "timeline rc $?"; grep -E "^span|^==" $R/timeline_new.txt
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
