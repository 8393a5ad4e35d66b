#!/usr/bin/env bash
# Session 33, call 3: the final tree. cce_bench (the floor and stage 10, loss + grad, 50 calls a case) at the
# generated shapes; the whole GPU suite; the op's tests of stage 10 and of the op itself (the op reaches the sorted C
# in dC's output through stage 10's C interface: gemma2_none_bf16 runs it).
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 150 /tmp/build/bench/cce_bench --shapes=gpt2,llama3,gemma2,gemma2_softcap,gemma2_flat \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$R/bench.json \
  --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? $((SECONDS-T0)) s"; grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head; echo "suite $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 500 ]; then
  (cd /tmp/build && timeout $((590-(SECONDS-T0))) ctest -R "^pytorch\.(stage10_plan_per_batch|op)\." -j4 --timeout 200 > $R/ctest_op.log 2>&1)
  grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_op.log | head
fi
echo "total $((SECONDS-T0)) s"
