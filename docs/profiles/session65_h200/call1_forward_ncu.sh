#!/usr/bin/env bash
# Session 65, call 1 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): session 64's next_forward_ncu.sh on an H200 and
# at two shapes. ncu's full set on one launch of each: stage 10's forward kernel (wgmma_pipeline_kernel with the tile
# statistics' epilogue), stage 03's forward kernel (the same pipeline with the plain fold), and the floor's forward
# GEMM (cce_bench's cublas_floor/loss/<shape>), at llama3's and gemma2's shapes: tensor pipe, issue, stall reasons.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call1
build /tmp/build . stage03_fused_gemm_ce stage10_plan_per_batch cce_bench > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for dims in "llama3 4096 128256" "gemma2 2304 256000"; do
  set -- $dims
  for stage in stage10_plan_per_batch stage03_fused_gemm_ce; do
    [ $((SECONDS-T0)) -gt 480 ] && { echo "$1 $stage not started"; continue; }
    extra=""; [ $stage = stage10_plan_per_batch ] && extra="--backward"
    timeout 100 ncu --set full -k regex:wgmma_pipeline_kernel -c 1 /tmp/build/stages/$stage --n 8192 --d $2 --v $3 \
      --dtype bf16 --data realistic --seed 1234 $extra --iters 0 > $R/ncu_${1}_$stage.txt 2>&1
    echo "$1 $stage ncu rc $? ($((SECONDS-T0)) s)"
  done
  [ $((SECONDS-T0)) -gt 500 ] && { echo "$1 floor not started"; continue; }
  timeout 100 ncu --set full -k regex:'nvjet|gemm|xmma|cutlass' -c 1 /tmp/build/bench/cce_bench --shapes=$1 \
    --benchmark_filter='^cublas_floor/loss/' > $R/ncu_${1}_floor.txt 2>&1
  echo "$1 floor ncu rc $? ($((SECONDS-T0)) s)"
done
grep -E "^  [a-zA-Z_].*\(|^    (Duration|Compute \(SM\) Throughput|Registers Per Thread|L2 Hit Rate|Achieved Occupancy)" \
  $R/ncu_*.txt | head -60
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
