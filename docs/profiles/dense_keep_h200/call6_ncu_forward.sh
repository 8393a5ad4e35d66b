#!/usr/bin/env bash
# Session 23, call 6: the forward pipeline at gemma2_flat under ncu, three ways at the same clocks: stage 10's
# loss alone (stage 03's fold), the dense plan's forward that keeps the tiles (FoldThenKeepTile), and cuBLAS's GEMM
# of the floor's loss.
set -o pipefail
T0=$SECONDS
R=$OUT/c6; mkdir -p $R
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
ARGS="--n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 --iters 0"
SEC="--section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section InstructionStats --section Occupancy"
timeout 70 ncu --clock-control none $SEC -k regex:wgmma_pipeline_kernel -c 1 $S10 $ARGS > $R/ncu_loss_alone.txt 2>&1
echo "loss alone rc $? $((SECONDS-T0)) s"
timeout 70 ncu --clock-control none $SEC -k regex:wgmma_pipeline_kernel -c 1 $S10 $ARGS --backward --plan dense > $R/ncu_keep.txt 2>&1
echo "keep rc $? $((SECONDS-T0)) s"
timeout 70 ncu --clock-control none $SEC -k regex:nvjet -c 1 /tmp/build/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^cublas_floor/loss/' --benchmark_repetitions=1 > $R/ncu_cublas.txt 2>&1
echo "cublas rc $? $((SECONDS-T0)) s"
for f in loss_alone keep cublas; do echo "$f: $(grep -E '^ +Duration|Compute \(SM\) Throughput|Issue Slots Busy|Executed Ipc Active' $R/ncu_$f.txt | awk '{print $NF}' | tr '\n' ' ')"; done
(cd $OUT && tar -czf c6.tgz c6 && rm -r c6)
echo "total $((SECONDS-T0)) s"
