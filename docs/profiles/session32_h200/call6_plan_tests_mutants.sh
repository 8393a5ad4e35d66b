#!/usr/bin/env bash
# Session 32, call 6 (the last 361 s): the new test with its bound at 4× (call 5: 3.0× on the new chunks, 33× on
# ca2100e's), with stage 10's other tests; then the new GPU mutants of the target's entry while time is left.
set -o pipefail
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 120 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch" -j4 --timeout 100 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head; echo "tests $((SECONDS-T0)) s"
/tmp/build/tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.DenseChunksRoundAFrequentTokensDcOnce' 2>&1 | grep -E "frequent token|OK|FAILED" | head -3
for m in g10_q_target_entry_zero g10_q_target_entry_unscaled; do
  [ $((SECONDS-T0)) -gt 190 ] && continue
  timeout 130 python3 scripts/mutants.py --gpu --only $m --build-dir /tmp/mut > $R/mutant_$m.txt 2>&1
  echo "mutant $m rc $?: $(grep -E 'caught|survived|SURVIVED|CAUGHT' $R/mutant_$m.txt | head -2 | tr '\n' ' ')"
done
echo "total $((SECONDS-T0)) s"
