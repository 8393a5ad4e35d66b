#!/usr/bin/env bash
# Session 45, call 2 (one H200): the small kernels after the forward as programmatic dependent launches
# (pdl_call2.patch on 231f067). Main is the patch reversed in a copy. A traced call of each tree and the executable
# in turns at lm32k's and gpt2's shapes (generator data); then the drop stages' and the shared kernels' tests on the
# patched tree, and the mutant g_dependent_launch_without_wait.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/lm-gen
{ echo "tree: 231f067 + pdl_call2.patch"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session45_h200/pdl_call2.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage10_plan_per_batch cce_capi) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
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
      [ $((SECONDS-T0)) -lt 230 ] || break 3
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/build-main/stages/stage10_plan_per_batch
      timeout 25 $B $A --backward --iters 50 > $R/t_${shape}_${tree}_$round.txt 2>&1
      echo "round $round $shape $tree: $(grep -E 'time  ' $R/t_${shape}_${tree}_$round.txt | cut -c1-100)"
    done
  done
done
(timeout 250 python3 scripts/mutants.py --gpu --only g_dependent_launch_without_wait --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -R "DropBeforeRecompute|DeterministicProducts|PlanPerBatch|SortPairs|TokenReduction|stage0[89]|stage1[01]|AllStages" -j4 --timeout 200) > $R/ctest_drop.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_drop.log; grep -E "\(Failed\)|Timeout" $R/ctest_drop.log | head -20
while [ ! -f $R/mut.rc ] && [ $((SECONDS-T0)) -lt 560 ]; do sleep 2; done; cat $R/mut.rc; tail -3 $R/mutants.txt
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
