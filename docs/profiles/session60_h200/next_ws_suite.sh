#!/usr/bin/env bash
# For a next session (written in session 60, not run): one H200, a fresh machine; run as CCE_COMMIT=<branch HEAD>
# bash <this> on a checkout of branch wip/s60-warp-specialized-products (stage 09's kept-tile owners warp-specialized
# on Hopper: a producer warpgroup, six stages, two consumer warpgroups, one block of 384 threads per SM). The branch
# built in /tmp/build; main's tree (warp_specialized_products.patch reversed in a copy) in /tmp/build-main;
# lm32k's and lm128k's models trained beside the builds; stages 09 and 10's tests first (the owners' paths), then the
# whole GPU suite; compute-sanitizer (memcheck, racecheck, synccheck) on stages 09 and 10 where the owners run on
# wgmma (D % 8 == 0, bf16), E's rows gathered (stage 09: rows in their order, by TMA; stage 10: grouped rows) and
# C's gathered (dE). About 470 s. next_ws_ab.sh, right after on the same warm machine, times the two trees.
T0=$SECONDS
R=$OUT/suite; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
train_lm_models
branch_and_main_builds docs/profiles/session60_h200/warp_specialized_products.patch bench/cce_bench \
  stage10_plan_per_batch || { cd $OUT && tar czf suite.tgz suite; exit 1; }
(cd /tmp/build && timeout 150 ctest -R "stage09|stage10|DeterministicProducts|PlanPerBatch|DropBeforeRecompute" -j4 \
  --timeout 120 --output-on-failure) > $R/ctest_owners.log 2>&1
echo "owners' tests rc $?: $(grep -E 'tests passed' $R/ctest_owners.log)"; grep -E '\*\*\*Failed|Timeout' $R/ctest_owners.log | head
gpu_suite 440
for stage in stage09_deterministic_products stage10_plan_per_batch; do
  for tool in memcheck racecheck synccheck; do
    [ $((SECONDS-T0)) -gt 560 ] && break
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 1 /tmp/build/stages/$stage --n 300 --d 200 --v 20001 \
      --dtype bf16 --data realistic --check --backward --iters 0 > $R/sanitizer_${stage}_$tool.txt 2>&1
    echo "$stage $tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_${stage}_$tool.txt)"
  done
done
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf suite.tgz suite
