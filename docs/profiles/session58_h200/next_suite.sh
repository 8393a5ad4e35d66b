#!/usr/bin/env bash
# For a next session (written in session 58, not run): one H200, a fresh machine; run as CCE_COMMIT=<branch HEAD>
# bash <this> on a checkout of branch wip/s58-grouping-from-last-eps (a batch after an automatic decision grouped
# once, near the eps the batch before chose). The branch built in /tmp/build; main's tree (next_batch_grouping.patch
# reversed in a copy) in /tmp/build-main; lm32k's and lm128k's models trained beside the builds; the new test and the
# whole GPU suite on the branch; compute-sanitizer on its stage 10; ncu's memory counters of misplaced_mass_kernel in
# f54806e's count order and main's grouped order (why the latter made it slower in session 58). About 530 s. next_ab.sh, right after on the same
# warm machine, times the two trees.
T0=$SECONDS
R=$OUT/suite; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
train_lm_models
P=docs/profiles/session58_h200
tree_without /tmp/main-tree $P/next_batch_grouping.patch
tree_without /tmp/count-tree $P/next_batch_grouping.patch $P/count_order.patch  # f54806e's stages 10 and 11
(build /tmp/build-main /tmp/main-tree bench/cce_bench stage10_plan_per_batch > $R/build_main.log 2>&1
 build /tmp/build-count /tmp/count-tree stage10_plan_per_batch > $R/build_count.log 2>&1) &
BM=$!
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf suite.tgz suite; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 90 ctest -R "PlanPerBatch.NextBatch|PlanPerBatch.AutomaticEps" --output-on-failure) > $R/ctest_next_batch.log 2>&1
echo "next-batch tests rc $?: $(grep -E 'tests passed' $R/ctest_next_batch.log)"
(cd /tmp/build && timeout $((495 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
stage10_sanitizers /tmp/build
mass_kernel_memory count=/tmp/build-count main=/tmp/build-main
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf suite.tgz suite
