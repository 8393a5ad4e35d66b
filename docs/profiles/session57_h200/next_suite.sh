#!/usr/bin/env bash
# For a next session (written in session 57, not run): one H200, a fresh machine; run as CCE_COMMIT=<branch HEAD>
# bash <this> on a checkout of branch wip/s57-regroup (the bucketed rarest-tile order, then the second grouping near
# the chosen eps). The branch built in /tmp/build; main's tree (next_grouping.patch reversed in a copy) in
# /tmp/build-main; the bucketed order alone (regroup_only.patch reversed) in /tmp/build-bucket; lm32k's and lm128k's
# models trained beside the builds; the whole GPU suite on the branch; compute-sanitizer memcheck and racecheck on its
# stage 10; ncu's duration of the grouping's kernels (and the second measurement's) in main's tree and the branch at
# lm32k's and gemma2's shapes. About 500 s. next_ab.sh, right after on the same warm machine, times the three.
T0=$SECONDS
R=$OUT/suite; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
train_lm_models
P=docs/profiles/session57_h200
tree_without /tmp/main-tree $P/next_grouping.patch
tree_without /tmp/bucket-tree $P/regroup_only.patch
(build /tmp/build-main /tmp/main-tree bench/cce_bench stage10_plan_per_batch > $R/build_main.log 2>&1
 build /tmp/build-bucket /tmp/bucket-tree bench/cce_bench > $R/build_bucket.log 2>&1) &
BM=$!
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf suite.tgz suite; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 60 ctest -R "PlanPerBatch.TokenGrouping|PlanPerBatch.Without" --output-on-failure) > $R/ctest_grouping.log 2>&1
echo "grouping tests rc $?: $(grep -E 'tests passed' $R/ctest_grouping.log)"
(cd /tmp/build && timeout $((520 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
stage10_sanitizers /tmp/build
plan_kernel_times 'token_|tile_rank|regroup|misplaced_mass|Radix|Onesweep' main=/tmp/build-main regroup=/tmp/build
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf suite.tgz suite
