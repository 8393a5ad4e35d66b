#!/usr/bin/env bash
# For the next session's first call, on branch wip/dense-target-rows (stage 10's dense chunks: the target's entry of
# Q at 0, S_it apart, dC's target rows summed whole in fp32): stage 10's GPU tests with the new
# DenseChunksKeepAFlatRowsTargetExact; memcheck of a dense chunk with dC (one chunk, and chunks of 128 rows); cce_bench
# at gemma2_flat (the floor, stage 10: errors and time against 6e85887's 44.25 ms, dE 2.36e-3, dC 2.72e-3); peers.py
# at gemma2_flat with eager PyTorch in the same process. Then (a second call): the three GPU mutants
# (g10_target_entry_kept, g10_target_term_not_in_de, g10_target_rows_without_products) and the whole suite.
set -o pipefail
T0=$SECONDS
R=$OUT/next; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 150 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch" -j4 --timeout 120 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head
/tmp/build/tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.DenseChunks*' 2>&1 | grep -E "flat softmax|frequent token|OK|FAILED" | head
S10=/tmp/build/stages/stage10_plan_per_batch
for extra in "" "--dense-chunk-rows 128"; do
  timeout 120 compute-sanitizer --tool memcheck $S10 --n 300 --d 136 --v 20011 --data random --plan dense --backward --check --iters 0 $extra > $R/memcheck.txt 2>&1
  echo "memcheck [$extra] rc $?: $(grep -E 'ERROR SUMMARY|check  ' $R/memcheck.txt | tr '\n' ' ' | cut -c1-200)"
done
timeout 120 /tmp/build/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=$R/bench_gemma2_flat.json --benchmark_out_format=json > $R/bench.txt 2>&1
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-200
timeout 200 python3 bench/peers.py --shapes gemma2_flat --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad \
  --reps 10 --cce-python /tmp/build/python --out $R/peers_gemma2_flat.json > $R/peers.log 2>&1
grep -E "stage10|eager" $R/peers.log | cut -c1-200
echo "total $((SECONDS-T0)) s"
