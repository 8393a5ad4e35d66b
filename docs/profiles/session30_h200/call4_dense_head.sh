#!/usr/bin/env bash
# Session 30, call 4 (a fresh machine): the sparse plan's dense head (--dense-head, new). Build; lm128k's data in the
# background; stage 10's plan tests (the new DenseHeadTakesTheLeadingTilesWhole among them) and its --check with
# the head at odd shapes; then the executable at lm128k's snapshots, gemma2 and llama3 with and without the head,
# the rounds alternating.
set -o pipefail
T0=$SECONDS
R=$OUT/c4; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c4.tgz -C $OUT c4; exit 1; }
echo "build $((SECONDS-T0)) s"
if [ ! -f /tmp/cce-lm-data/lm128k/targets.npy ]; then
  (timeout 400 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
fi
S10=/tmp/build/stages/stage10_plan_per_batch
for args in "--n 1100 --d 100 --v 3011" "--n 1100 --d 264 --v 30011 --softcap 30 --ignore-frac 0.1 --reduction none" "--n 2500 --d 128 --v 50257 --reduction sum"; do
  for share in 0.5 0.05; do
    timeout 120 $S10 $args --backward --check --dense-head $share --iters 0 > $R/check.txt 2>&1; rc=$?
    echo "check [$args] head $share rc $rc: $(grep -E 'backward  |passed|FAIL' $R/check.txt | tr '\n' ' ' | cut -c1-300)"
    cat $R/check.txt >> $R/checks_all.txt
  done
done
(cd /tmp/build && timeout 240 ctest -R "PlanPerBatch|stage10" -j4 --timeout 200 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head; echo "tests $((SECONDS-T0)) s"
for dims in "--n 8192 --d 2304 --v 256000" "--n 8192 --d 4096 --v 128256"; do
  for round in 1 2; do for share in 0 0.5; do
    timeout 60 $S10 $dims --backward --iters 20 --dense-head $share > $R/t.txt 2>&1
    echo "[$dims] round $round head $share: $(grep -E 'time  |backward  ' $R/t.txt | tr '\n' ' ' | cut -c1-260)"
  done; done
done
while [ ! -f $R/lm.rc ] && [ -z "$(ls /tmp/cce-lm-data/lm128k/targets.npy 2>/dev/null)" ] && [ $((SECONDS-T0)) -lt 450 ]; do sleep 2; done
while [ -f $R/lm_data.log ] && [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 450 ]; do sleep 2; done
cat $R/lm.rc 2>/dev/null
for s in lm128k lm128k_s30 lm128k_s100 lm128k_s300; do
  for round in 1 2; do for share in 0 0.5 0.3; do
    [ $((SECONDS-T0)) -gt 560 ] && continue
    timeout 30 $S10 --load /tmp/cce-lm-data/$s --backward --iters 20 --dense-head $share > $R/t.txt 2>&1
    echo "$s round $round head $share: $(grep -E 'time  |backward  |kept tiles' $R/t.txt | tr '\n' ' ' | cut -c1-330)"
  done; done
done
tar czf $OUT/c4.tgz -C $OUT c4 && rm -r $R
echo "total $((SECONDS-T0)) s"
