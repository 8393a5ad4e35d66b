#!/usr/bin/env bash
# Session 65, call 2 (CCE_COMMIT=<HEAD> bash <this>): where the forward kernels' warps stall. Stages 03 and 10 built
# with -lineinfo; at gemma2's shape one launch each of their forward kernel (wgmma_pipeline_kernel) under ncu: every
# stall reason per issued instruction (smsp__average_warps_issue_stalled_*), and SourceCounters with the sources
# imported, asked for the lines with the most stall samples: its text output gives none (call 3 exports them).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call2
cmake -S . -B /tmp/build-lines -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA_FLAGS=-lineinfo > $R/build.log 2>&1 && ninja -C /tmp/build-lines stage03_fused_gemm_ce \
  stage10_plan_per_batch >> $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for dims in "gemma2 2304 256000" "llama3 4096 128256"; do
  set -- $dims
  for stage in stage10_plan_per_batch stage03_fused_gemm_ce; do
    [ $((SECONDS-T0)) -gt 420 ] && { echo "$1 $stage not started"; continue; }
    extra=""; [ $stage = stage10_plan_per_batch ] && extra="--backward"
    timeout 90 ncu --section WarpStateStats --section SourceCounters --import-source yes \
      --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' -k regex:wgmma_pipeline_kernel \
      -c 1 /tmp/build-lines/stages/$stage --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 $extra \
      --iters 0 > $R/stalls_${1}_${stage%%_*}.txt 2>&1
    echo "$1 $stage rc $? ($((SECONDS-T0)) s)"
  done
done
cd $OUT && tar czf call2.tgz call2 && rm -rf call2
