#!/usr/bin/env bash
# Session 44, call 1 (one H200): the decision's window (window_call1.patch: the slot offsets by a one-block scan and
# the slots, then dc_unkept_rows, queued before the decision's wait; the row states started by target_position_kernel;
# cudaFuncSetAttribute once per kernel and device). Main is the patch reversed in a copy. The tests of stages 08-11 on
# the patched tree; a traced call of each tree at lm32k's shape (generator data); the executable in turns.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/lm-gen
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session44_h200/window_call1.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage10_plan_per_batch cce_capi) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"; tail -1 $R/build_main.log
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic \
  --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
for tree in main patched; do
  B=/tmp/build/python; [ $tree = main ] && B=/tmp/build-main/python
  timeout 40 python3 bench/stage_timeline.py $B /tmp/lm-gen/lm32k --calls 5 --out $R/timeline_lm32k_gen_$tree.txt > $R/timeline_$tree.log 2>&1
  echo "timeline $tree rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_gen_$tree.txt
done
for round in 1 2 3 4 5; do
  for shape in lm32k_gen gpt2_gen; do
    case $shape in
      lm32k_gen) A="--n 8192 --d 768 --v 32000 --dtype bf16 --data realistic";;
      gpt2_gen) A="--n 20480 --d 768 --v 50257 --dtype bf16 --data realistic";;
    esac
    for tree in main patched; do
      [ $((SECONDS-T0)) -lt 330 ] || break 3
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/build-main/stages/stage10_plan_per_batch
      timeout 25 $B $A --backward --iters 50 > $R/t_${shape}_${tree}_$round.txt 2>&1
      echo "round $round $shape $tree: $(grep -E 'time  ' $R/t_${shape}_${tree}_$round.txt | cut -c1-100)"
    done
  done
done
(cd /tmp/build && ctest -L "gpu|stage" -R "(08|09|10|11)_|PlanPerBatch|DeterministicProducts|DropBeforeRecompute|LaterStages|stage0[89]|stage1[01]|SortPairs" -j4 --timeout 200) > $R/ctest_changed.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_changed.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_changed.log | head -20
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
