#!/usr/bin/env bash
# Session 29, call 6 (a fresh machine): add_target_terms_kernel with a run's rows spread over the block's warps.
# Both trees built side by side (main's HEAD as the base, the working tree as the change); lm128k_s0's data
# (bench/lm_data.py --steps 1: the untrained snapshot) and the whole GPU suite of the change on the same GPU;
# then an A/B at lm128k_s0 and gemma2_flat, cce_bench's stage 10 loss + grad, the trees alternating, two rounds
# (the floor in the base's runs).
set -o pipefail
T0=$SECONDS
R=$OUT/c6; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt; git diff > $R/change.diff
git worktree add -f /tmp/base HEAD > /dev/null 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 &
B1=$!
(cmake -S /tmp/base -B /tmp/build-base -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-base cce_bench cce_capi) > $R/build_base.log 2>&1 &
B2=$!
(timeout 300 python3 bench/lm_data.py --only lm128k --steps 1 --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm_data rc $? $((SECONDS-T0)) s" > $R/lm_data.rc) &
LM=$!
wait $B1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c6.tgz -C $OUT c6; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run|Total Test" $R/ctest_gpu.log | head
grep -E "LongRunsOfOneTarget" $R/ctest_gpu.log | head -3
echo "suite $((SECONDS-T0)) s"
wait $B2 || { grep -B2 -A8 error $R/build_base.log | head -20; }
wait $LM; cat $R/lm_data.rc; ls /tmp/cce-lm-data
mkdir -p /tmp/cce-inputs
for tree in build-base build build-base build; do
  for s in lm128k_s0 gemma2_flat; do
    f=cublas_floor; [ $tree = build ] && f=none
    timeout 120 /tmp/$tree/bench/cce_bench --shapes=$s --lm-data=/tmp/cce-lm-data \
      --benchmark_filter="^(${f}|stage10_plan_per_batch)/loss_grad/" --benchmark_out=$R/ab_${tree}_${s}_$((SECONDS-T0)).json --benchmark_out_format=json > $R/ab.txt 2>&1
    echo "$tree $s $(grep -h 'median' $R/ab.txt | awk '{print $1, $2}' | tr '\n' ' ') at $((SECONDS-T0)) s"
  done
done | tee $R/ab_rounds.txt
tar czf $OUT/c6.tgz -C $OUT c6 && rm -r $R
echo "total $((SECONDS-T0)) s"
