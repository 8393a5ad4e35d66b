#!/usr/bin/env bash
# Session 43, call 2 (one H200): call 1's changes with its regressions replaced (small_kernels.patch: merge_chunk in
# eight lanes a row joined in a fixed order, not one thread a row unrolled; the valid rows' sums in blocks of 32 row
# lanes; the one-block sort 1024 × 8). sort_bench.cu first (one block's sort in five shapes against cub's device
# sort). Main is the patch reversed in a copy. Tests of the changed parts on the patched tree; then a traced call of
# each tree at lm32k's shape on the generator's data (no training this call), and the executable in turns.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/lm-gen
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90 docs/profiles/session43_h200/sort_bench.cu -o /tmp/sort_bench > $R/sort_bench_build.log 2>&1 && /tmp/sort_bench > $R/sort_bench.txt 2>&1; echo "sort bench rc $?"; cat $R/sort_bench.txt
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session43_h200/small_kernels.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage10_plan_per_batch cce_capi) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"; tail -1 $R/build_main.log
(cd /tmp/build && ctest -R "SortPairs|08|09|10|11" -L "gpu|stage" -j4 --timeout 200) > $R/ctest_changed.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_changed.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_changed.log | head -20
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic \
  --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
for tree in main patched; do
  B=/tmp/build/python; [ $tree = main ] && B=/tmp/build-main/python
  timeout 40 python3 bench/stage_timeline.py $B /tmp/lm-gen/lm32k --calls 5 --out $R/timeline_lm32k_gen_$tree.txt > $R/timeline_$tree.log 2>&1
  echo "timeline $tree rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_gen_$tree.txt
done
for round in 1 2 3 4; do
  for shape in lm32k_gen gpt2_gen; do
    case $shape in
      lm32k_gen) A="--n 8192 --d 768 --v 32000 --dtype bf16 --data realistic";;
      gpt2_gen) A="--n 20480 --d 768 --v 50257 --dtype bf16 --data realistic";;
    esac
    for tree in main patched; do
      [ $((SECONDS-T0)) -lt 520 ] || break 3
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/build-main/stages/stage10_plan_per_batch
      timeout 25 $B $A --backward --iters 50 > $R/t_${shape}_${tree}_$round.txt 2>&1
      echo "round $round $shape $tree: $(grep -E 'time  ' $R/t_${shape}_${tree}_$round.txt | cut -c1-100)"
    done
  done
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2 && rm -f call2/t_*.txt
