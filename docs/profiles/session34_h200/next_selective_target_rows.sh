#!/usr/bin/env bash
# For the next session, on branch wip/selective-target-rows (or main with docs/wip/selective_target_rows.patch
# applied): stage 10's one dense chunk sums a target token's row of dC whole in fp32 only where its product part is
# over a quarter of the row. Build; stage 10's tests (the new counts of rows summed whole among them); memcheck of a
# dense chunk with dC; the three GPU mutants of the rows (g10_target_rows_without_products, _never_whole,
# _always_whole) with one baseline; cce_bench at gemma2_flat and lm128k_s0 (floor and stage 10: time against
# 47387b7's 0.824x and 0.816x the floor, errors against eager's 1.685e-3 / 7.749e-4 and 1.669e-3 / 1.657e-3), and the
# executable's plan line (how many rows were summed whole) at lm128k and lm32k, trained data, with --plan dense.
set -o pipefail
T0=$SECONDS
R=$OUT/next; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cd /tmp/build && timeout 150 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch" -j4 --timeout 120 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head
/tmp/build/tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.DenseChunks*:PlanPerBatch.LongRuns*' 2>&1 | grep -E "flat softmax|frequent token|OK|FAILED" | head
timeout 120 compute-sanitizer --tool memcheck /tmp/build/stages/stage10_plan_per_batch --n 300 --d 136 --v 20011 \
  --data random --plan dense --backward --check --iters 0 > $R/memcheck.txt 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|check  ' $R/memcheck.txt | tr '\n' ' ' | cut -c1-200)"
timeout 300 python3 scripts/mutants.py --gpu --only g10_target_rows_without_products --only g10_target_rows_never_whole \
  --only g10_target_rows_always_whole --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $?: $(grep -E 'caught|survived|did not build' $R/mutants.txt | tail -2 | tr '\n' ' ' | cut -c1-300)"
mkdir -p /tmp/cce-inputs
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done
cat $R/lm_data.rc 2>/dev/null
CCE_COMMIT=$(git rev-parse --short HEAD) timeout 100 /tmp/build/bench/cce_bench --shapes=gemma2_flat,lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=$R/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-200
for s in lm128k lm128k_s30 gemma2_flat; do
  d=/tmp/cce-lm-data/$s; [ $s = gemma2_flat ] && d=/tmp/cce-inputs/$s
  timeout 40 /tmp/build/stages/stage10_plan_per_batch --load $d --plan dense --backward --iters 3 > $R/plan_$s.txt 2>&1
  echo "$s: $(grep -oE "dC's rows of [0-9]+ target tokens, [0-9]+ summed whole" $R/plan_$s.txt)"
done
echo "total $((SECONDS-T0)) s"
