#!/usr/bin/env bash
# Session 32, call 5: the dense chunks with the target's entry of Q rewritten as S_it/α_i (dC rounded once; the
# target terms' sort and kernel gone). Build; lm128k's data in the background; the whole GPU suite (with the new
# PlanPerBatch.DenseChunksRoundAFrequentTokensDcOnce); meanwhile that test built on ca2100e's stage code (the target
# terms added after dC's rounding: it must fail there); then peers.py at lm128k_s30 and lm128k_s100: eager, the
# op as it chooses, and the op with --plan dense (call 4 measured the old chunks there: dC 4.22e-3 and 3.72e-3).
set -o pipefail
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 300 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm_data rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
# The new test on the old stage code: ca2100e's tree with this tree's test file.
(mkdir -p /tmp/old && git archive ca2100e | tar -x -C /tmp/old && cp tests/gpu/test_drop_stages.cpp /tmp/old/tests/gpu/ \
  && cmake -S /tmp/old -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  && nice ninja -C /tmp/build-old -j6 test_stages_gpu; echo "old build rc $? $((SECONDS-T0)) s" > $R/old.rc) > $R/build_old.log 2>&1 &
(cd /tmp/build && timeout 430 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head; echo "suite $((SECONDS-T0)) s"
/tmp/build/tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.DenseChunksRoundAFrequentTokensDcOnce' > $R/new_test_new_code.txt 2>&1
echo "new test, new code rc $?: $(grep -E 'frequent token|OK|FAILED' $R/new_test_new_code.txt | head -3 | tr '\n' ' ')"
while [ ! -f $R/old.rc ] && [ $((SECONDS-T0)) -lt 470 ]; do sleep 2; done; cat $R/old.rc 2>/dev/null
[ -x /tmp/build-old/tests/gpu/test_stages_gpu ] && /tmp/build-old/tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.DenseChunksRoundAFrequentTokensDcOnce' > $R/new_test_old_code.txt 2>&1
echo "new test, ca2100e's code rc $?: $(grep -E 'frequent token|dense chunk|OK|FAILED' $R/new_test_old_code.txt | head -4 | tr '\n' ' ' | cut -c1-400)"
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 480 ]; do sleep 2; done; cat $R/lm.rc 2>/dev/null
IM=peer_torch_eager,stage10_plan_per_batch_op
for flags in "" "--plan dense"; do
  [ $((SECONDS-T0)) -gt 540 ] && continue
  tag=$(echo "op$flags" | tr -c 'A-Za-z0-9.\n' '_')
  timeout 60 python3 bench/peers.py --shapes lm128k_s30,lm128k_s100 --impls $IM --modes loss_grad \
    --reps 5 --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "$flags" \
    --out $R/peers_$tag.json > $R/peers_$tag.log 2>&1
  echo "peers [$flags] rc $? $((SECONDS-T0)) s"
  grep -E "^(stage10|peer_torch_eager)" $R/peers_$tag.log | cut -c1-200
  IM=stage10_plan_per_batch_op
done
echo "total $((SECONDS-T0)) s"
