#!/usr/bin/env bash
# Session 30, call 5 (a fresh machine): the tree with the dense head (--dense-head, default off). Build; the whole
# GPU suite; beside it lm128k's model trained 100 steps (its snapshots s30 and s100: the same steps of warm-up as
# the 800-step run's); then the head's share at lm128k_s30 and lm128k_s100, the rounds alternating.
set -o pipefail
T0=$SECONDS
R=$OUT/c5; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c5.tgz -C $OUT c5; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 200 python3 bench/lm_data.py --only lm128k --steps 100 --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run|Total Test" $R/ctest_gpu.log | head; echo "suite $((SECONDS-T0)) s"
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done
cat $R/lm.rc 2>/dev/null
S10=/tmp/build/stages/stage10_plan_per_batch
for s in lm128k_s30 lm128k_s100; do
  for round in 1 2; do for share in 0 0.5 0.7 0.85; do
    [ $((SECONDS-T0)) -gt 500 ] && continue
    timeout 30 $S10 --load /tmp/cce-lm-data/$s --backward --iters 20 --dense-head $share > $R/t.txt 2>&1
    echo "$s round $round head $share: $(grep -E 'time  |backward  |kept tiles' $R/t.txt | tr '\n' ' ' | sed 's/stage 09.s products over the kept pairs after them//' | cut -c1-300)"
  done; done
done
tar czf $OUT/c5.tgz -C $OUT c5 && rm -r $R
echo "total $((SECONDS-T0)) s"
