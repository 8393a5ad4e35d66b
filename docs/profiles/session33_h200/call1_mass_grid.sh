#!/usr/bin/env bash
# Session 33, call 1: dropped_mass_kernel with the token blocks along x (dropped_mass_grid.patch, in the tree sent)
# against main's grid (the patch reversed, built beside it): ncu of the kernel at gemma2's shape, stage 10's GPU
# tests on the patched tree, the stage executable at gemma2's and llama3's shapes in turns (and once with the
# forward in one chunk, --chunk-rows V: what the chunks' tails and merges cost); then session 32's two GPU mutants.
set -o pipefail
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
P=docs/profiles/session33_h200/dropped_mass_grid.patch
rm -rf /tmp/src-base && mkdir /tmp/src-base && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t /tmp/src-base && (cd /tmp/src-base && patch -R -p1 < $OLDPWD/$P) > $R/patch.log 2>&1 || { echo "patch failed"; cat $R/patch.log; exit 1; }
( (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1; echo $? > $R/build.rc) &
( (cmake -S /tmp/src-base -B /tmp/build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-base stage10_plan_per_batch) > $R/build_base.log 2>&1; echo $? > $R/build_base.rc) &
wait
[ "$(cat $R/build.rc)$(cat $R/build_base.rc)" = 00 ] || { grep -B2 -A8 error $R/build.log $R/build_base.log | head -40; exit 1; }
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 120 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch" -j4 --timeout 100 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head; echo "tests $((SECONDS-T0)) s"
G="--n 8192 --d 2304 --v 256000"; L="--n 8192 --d 4096 --v 128256"
for tree in base main; do
  B=/tmp/build; [ $tree = base ] && B=/tmp/build-base
  timeout 90 ncu --clock-control none -k regex:dropped_mass -c 1 --metrics gpu__time_duration.sum,dram__bytes_read.sum,lts__t_bytes.sum \
    $B/stages/stage10_plan_per_batch $G --backward --iters 1 > $R/ncu_mass_$tree.txt 2>&1
  echo "ncu $tree: $(grep -E 'gpu__time|dram__bytes|lts__t_bytes' $R/ncu_mass_$tree.txt | tr -s ' ' | tr '\n' ' ')"
done
for round in 1 2 3; do
  for dims in "$G" "$L"; do
    for tree in base main; do
      B=/tmp/build; [ $tree = base ] && B=/tmp/build-base
      timeout 60 $B/stages/stage10_plan_per_batch $dims --backward --iters 20 > $R/t.txt 2>&1
      echo "round $round $tree [$dims]: $(grep -E 'time  |kept tiles' $R/t.txt | tr '\n' ' ' | cut -c1-220)"
    done
  done
done
for extra in "" "--chunk-rows 256000" "" "--chunk-rows 256000"; do
  timeout 60 /tmp/build/stages/stage10_plan_per_batch $G --backward --iters 20 $extra > $R/t.txt 2>&1
  echo "gemma2 [$extra]: $(grep -E 'time  |plan  |memory' $R/t.txt | tr '\n' ' ' | cut -c1-300)"
done
echo "A/B $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 330 ]; then
  timeout $((590-(SECONDS-T0))) python3 scripts/mutants.py --gpu --only g10_q_target_entry_zero --only g10_q_target_entry_unscaled \
    --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
  echo "mutants rc $?: $(grep -iE 'caught|survived|not run' $R/mutants.txt | tail -4 | tr '\n' ' ')"
fi
echo "total $((SECONDS-T0)) s"
