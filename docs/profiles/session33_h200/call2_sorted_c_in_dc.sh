#!/usr/bin/env bash
# Session 33, call 2: stage 10's sparse forward with all of sorted C in dC's output (sorted_c_in_dc.patch, in the
# tree sent) against e1ba8a2's chunks (the patch reversed, built beside it): stage 10's GPU tests and the new
# PlanPerBatch.ForwardGathersSortedCIntoDc on the patched tree, compute-sanitizer memcheck on the stage at a shape
# where the path runs, then the stage executable at gemma2's, llama3's and lm128k's shapes in turns.
set -o pipefail
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
P=docs/profiles/session33_h200/sorted_c_in_dc.patch
rm -rf /tmp/src-base && mkdir /tmp/src-base && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t /tmp/src-base && (cd /tmp/src-base && patch -R -p1 < $OLDPWD/$P) > $R/patch.log 2>&1 || { echo "patch failed"; cat $R/patch.log; exit 1; }
( (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1; echo $? > $R/build.rc) &
( (cmake -S /tmp/src-base -B /tmp/build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-base stage10_plan_per_batch) > $R/build_base.log 2>&1; echo $? > $R/build_base.rc) &
wait
[ "$(cat $R/build.rc)$(cat $R/build_base.rc)" = 00 ] || { grep -B2 -A8 error $R/build.log $R/build_base.log | head -40; exit 1; }
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 150 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch" -j4 --timeout 120 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test|ForwardGathers" $R/ctest_stage10.log | head; echo "tests $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
timeout 120 compute-sanitizer --tool memcheck $S10 --n 300 --d 200 --v 30011 --backward --slot-mb 1 --check --iters 0 > $R/memcheck.txt 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|plan  |check' $R/memcheck.txt | head -4 | tr '\n' ' ' | cut -c1-300)"
G="--n 8192 --d 2304 --v 256000"; L="--n 8192 --d 4096 --v 128256"; K="--n 8192 --d 2048 --v 128000"
for round in 1 2 3; do
  for dims in "$G" "$L" "$K"; do
    for tree in base main; do
      B=/tmp/build; [ $tree = base ] && B=/tmp/build-base
      timeout 60 $B/stages/stage10_plan_per_batch $dims --backward --iters 20 > $R/t.txt 2>&1
      echo "round $round $tree [$dims]: $(grep -E 'time  |plan  |memory' $R/t.txt | sed 's/beyond the inputs.*//' | tr -s ' ' | tr '\n' ' ' | cut -c1-330)"
    done
  done
done
echo "total $((SECONDS-T0)) s"
