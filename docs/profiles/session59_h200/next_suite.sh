#!/usr/bin/env bash
# For a next session (written in session 59, not run): one H200, a fresh machine; run as CCE_COMMIT=<branch HEAD>
# bash <this> on a checkout of branch wip/s59-order-from-batch-before (the forward keeps the vocabulary order of the
# model's batch before, sorting every 16th batch). The branch built in /tmp/build; main's tree
# (order_from_batch_before.patch reversed in a copy) in /tmp/build-main; lm32k's and lm128k's models trained beside
# the builds; the new tests, then the whole GPU suite on the branch; compute-sanitizer on stage 10, also over calls
# that keep the order. About 450 s. next_ab.sh, right after on the same warm machine, times the two trees.
T0=$SECONDS
R=$OUT/suite; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
train_lm_models
P=docs/profiles/session59_h200
tree_without /tmp/main-tree $P/order_from_batch_before.patch
(build /tmp/build-main /tmp/main-tree bench/cce_bench stage10_plan_per_batch > $R/build_main.log 2>&1) &
BM=$!
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf suite.tgz suite; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 120 ctest -R "PlanPerBatch.NextBatch|VocabularyOrder|stage1[01].*check" --output-on-failure) \
  > $R/ctest_new.log 2>&1
echo "new tests rc $?: $(grep -E 'tests passed' $R/ctest_new.log)"
(cd /tmp/build && timeout $((470 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
stage10_sanitizers /tmp/build
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 1 /tmp/build/stages/stage10_plan_per_batch --n 300 \
  --d 200 --v 20001 --dtype bf16 --data realistic --plan sparse --backward --iters 3 > $R/sanitizer_kept_order.txt 2>&1
echo "memcheck over kept orders rc $?: $(grep -E 'ERROR SUMMARY' $R/sanitizer_kept_order.txt)"
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf suite.tgz suite
