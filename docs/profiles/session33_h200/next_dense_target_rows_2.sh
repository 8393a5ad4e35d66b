#!/usr/bin/env bash
# The next session's second call, on branch wip/dense-target-rows after next_dense_target_rows.sh: the three GPU
# mutants of the target's term apart (one baseline for all three), then the whole GPU suite if time is left.
set -o pipefail
T0=$SECONDS
R=$OUT/next2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
timeout 330 python3 scripts/mutants.py --gpu --only g10_target_entry_kept --only g10_target_term_not_in_de \
  --only g10_target_rows_without_products --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $?: $(grep -E 'caught|survived|SURVIVED|did not build' $R/mutants.txt | tail -4 | tr '\n' ' ')"
if [ $((SECONDS-T0)) -lt 250 ]; then
  (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1
  (cd /tmp/build && timeout $((590-(SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
  grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head
fi
echo "total $((SECONDS-T0)) s"
