#!/usr/bin/env bash
# Session 44, call 4 (one H200): call 3's tiled sort with each block's count of every tile's digits loading eight
# keys before their counts (sort_call4.patch; call 3's pass waited on L2 for each key). Main (d8527e1) is the patch
# reversed in a copy. A traced call of the patched tree and the executable in turns at lm32k's and gpt2's shapes
# (generator data); the sort's and the drop stages' tests; then the session's seven GPU mutants, time-boxed.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/lm-gen
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session44_h200/sort_call4.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage10_plan_per_batch cce_capi) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"; tail -1 $R/build_main.log
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic \
  --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
timeout 40 python3 bench/stage_timeline.py /tmp/build/python /tmp/lm-gen/lm32k --calls 5 --out $R/timeline_lm32k_gen_patched.txt > $R/timeline_patched.log 2>&1
echo "timeline rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_gen_patched.txt; grep "tiled_radix" $R/timeline_lm32k_gen_patched.txt | head -2 | cut -c1-60
for round in 1 2 3 4 5; do
  for shape in lm32k_gen gpt2_gen; do
    case $shape in
      lm32k_gen) A="--n 8192 --d 768 --v 32000 --dtype bf16 --data realistic";;
      gpt2_gen) A="--n 20480 --d 768 --v 50257 --dtype bf16 --data realistic";;
    esac
    for tree in main patched; do
      [ $((SECONDS-T0)) -lt 190 ] || break 3
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/build-main/stages/stage10_plan_per_batch
      timeout 25 $B $A --backward --iters 50 > $R/t_${shape}_${tree}_$round.txt 2>&1
      echo "round $round $shape $tree: $(grep -E 'time  ' $R/t_${shape}_${tree}_$round.txt | cut -c1-100)"
    done
  done
done
(cd /tmp/build && ctest -L "gpu|stage" -R "SortPairs|DropBeforeRecompute|^stage0[89]_[a-z_]+\.check|^stage10_plan_per_batch\.check|many_tokens" -j4 --timeout 200) > $R/ctest_sort.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_sort.log; grep -E "\(Failed\)|Timeout" $R/ctest_sort.log | head
timeout $((560-(SECONDS-T0))) python3 scripts/mutants.py --gpu --only g_tiled_sort_writes_padding --only g_tiled_sort_tile_major \
  --only g08_sort_key_ascending --only g09_slot_offsets_inclusive --only g09_unkept_rows_without_tail \
  --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -9 $R/mutants.txt
cd $OUT && tar czf call4.tgz call4
