#!/usr/bin/env bash
# Session 43, call 1 (one H200): lm32k's small kernels (small_kernels.patch: the small sorts in one block, tail_mass
# in blocks of 1024 threads, merge_chunk unrolled over blocks of 64, the valid rows' sums without a load waiting on
# its target). The tree sent is main + the patch; main is the patch reversed in a copy, built apart. Meanwhile
# lm_data.py trains lm32k's model. The new sort's test and stages 08-11's GPU tests on the patched tree; then stage
# 10's executable, the trees in turns, at lm32k (trained data and the generator) and gpt2's shape (N = 20480: the
# device sort); then one traced call of each tree at lm32k (bench/stage_timeline.py).
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/lm-gen
{ git log --oneline -1; git status --short; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session43_h200/small_kernels.patch && cmake -S . -B /tmp/build-main $CM && ninja -C /tmp/build-main stage10_plan_per_batch cce_capi) > $R/build_main.log 2>&1 || { tail -20 $R/build_main.log; }
echo "main build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "SortPairs|08|09|10|11" -L "gpu|stage" -j4 --timeout 200) > $R/ctest_changed.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_changed.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_changed.log | head -20
[ -f /tmp/lm-gen/lm32k/c.npy ] || /tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic \
  --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 340 ]; do sleep 2; done; cat $R/lm.rc 2>/dev/null
for round in 1 2 3; do
  for shape in lm32k lm32k_gen gpt2_gen; do
    case $shape in
      lm32k) A="--load /tmp/cce-lm-data/lm32k";;
      lm32k_gen) A="--n 8192 --d 768 --v 32000 --dtype bf16 --data realistic";;
      gpt2_gen) A="--n 20480 --d 768 --v 50257 --dtype bf16 --data realistic";;
    esac
    for tree in main patched; do
      [ $((SECONDS-T0)) -lt 500 ] || break 3
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/build-main/stages/stage10_plan_per_batch
      timeout 25 $B $A --backward --iters 50 > $R/t_${shape}_${tree}_$round.txt 2>&1
      echo "round $round $shape $tree: $(grep -E 'time  |kept tiles' $R/t_${shape}_${tree}_$round.txt | tr '\n' ' ' | cut -c1-220)"
    done
  done
done
for tree in main patched; do
  [ $((SECONDS-T0)) -lt 540 ] || break
  B=/tmp/build/python; [ $tree = main ] && B=/tmp/build-main/python
  timeout 40 python3 bench/stage_timeline.py $B /tmp/cce-lm-data/lm32k --calls 5 --out $R/timeline_lm32k_$tree.txt > $R/timeline_$tree.log 2>&1
  echo "timeline $tree rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_$tree.txt
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
