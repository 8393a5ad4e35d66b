#!/usr/bin/env bash
# Session 31, call 6 (the last 285 s of device time): runs_counting_sort.patch, the recomputation's runs put longest
# first by a counting sort over their lengths (1..8) instead of std::stable_sort, the same order (checked on the CPU
# over 2000 random lists). call5's lm32k trace has the GPU idle 65 us while the host builds these runs. Build
# main's tree (stage 10's executable kept aside), patch, rebuild; stage 09's and 10's GPU tests on the patched tree;
# then the executable at lm32k's and gpt2's shapes (generator), the trees alternating.
set -o pipefail
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && timeout 100 ninja -C /tmp/build stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
cp /tmp/build/stages/stage10_plan_per_batch /tmp/s10_main
patch -p1 < docs/profiles/session31_h200/runs_counting_sort.patch > $R/patch.log 2>&1 || { cat $R/patch.log; exit 1; }
timeout 120 ninja -C /tmp/build stage09_deterministic_products stage10_plan_per_batch test_stages_gpu > $R/build_patched.log 2>&1 || { grep -B2 -A8 error $R/build_patched.log | head -40; exit 1; }
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 90 ctest -R "^(DeterministicProducts|PlanPerBatch)\.|^stage09_deterministic_products\.check|^stage10_plan_per_batch\.check" -j4 --timeout 80 > $R/ctest.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run" $R/ctest.log | head; echo "tests $((SECONDS-T0)) s"
for round in 1 2; do
  for dims in "--n 8192 --d 768 --v 32000" "--n 20480 --d 768 --v 50257"; do
    for tree in main patched; do
      B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/s10_main
      timeout 20 $B $dims --data realistic --backward --iters 50 > $R/t.txt 2>&1
      echo "round $round $tree [$dims]: $(grep -E 'time  ' $R/t.txt | cut -c1-120)"
    done
  done
done
echo "total $((SECONDS-T0)) s"
