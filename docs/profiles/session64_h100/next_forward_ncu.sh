#!/usr/bin/env bash
# For a next session (written in session 64, not run; a fresh machine, about 300 s; CCE_COMMIT=<HEAD> bash <this>):
# the forward against cuBLAS's GEMM at llama3's shape on the H100, where stage 10's loss alone is 2.6% over the floor's
# forward GEMM and its loss + grad 0.2 ms over issue 25's 14 ms. ncu's full set on one launch of each: stage 10's
# forward kernel (wgmma_pipeline_kernel with the tile statistics' epilogue, in the stage executable's first call) and
# the floor's forward GEMM (cce_bench's cublas_floor/loss/llama3): tensor pipe, issue and stall reasons, L2 and DRAM.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start next_forward
build /tmp/build . stage10_plan_per_batch cce_bench > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 200 ncu --set full -k regex:wgmma_pipeline_kernel -c 1 /tmp/build/stages/stage10_plan_per_batch --n 8192 \
  --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_forward_llama3.txt 2>&1
echo "forward ncu rc $? ($((SECONDS-T0)) s)"
timeout 200 ncu --set full -k regex:'nvjet|gemm|xmma' -c 1 /tmp/build/bench/cce_bench --shapes=llama3 \
  --benchmark_filter='^cublas_floor/loss/' > $R/ncu_floor_llama3.txt 2>&1
echo "floor ncu rc $? ($((SECONDS-T0)) s)"
grep -E "^  [a-zA-Z].*(Compute \(SM\) Throughput|Memory Throughput|Duration|Registers Per Thread|Achieved Occupancy|L2 Hit Rate)" \
  $R/ncu_forward_llama3.txt $R/ncu_floor_llama3.txt
cd $OUT && tar czf next_forward.tgz next_forward && rm -rf next_forward
