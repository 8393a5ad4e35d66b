#!/usr/bin/env bash
# Session 66, call 1 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): stage 08's gather of sorted C made by the
# forward pipeline's idle producer warps (common/tile/row_gather.cuh) against the separate gather_rows_kernel
# (CCE_EXP_SEPARATE_GATHER=1, the switch read once per process). 1: stages 08, 09 and 10 --check where the pipeline
# runs (D a multiple of 8), pairs and a single token block, several chunks, under compute-sanitizer too; 2: both
# gathers' outputs (loss, LSE, dE, dC) compared byte for byte; 3: cce_bench's stage 10 (loss, loss + grad) at llama3
# and gemma2, the two gathers in turns, the floor in the first round; 4: the rest of the tree built for call 2's suite.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call1
build /tmp/build . stage08_drop_before_recompute stage09_deterministic_products stage10_plan_per_batch cce_bench \
  > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
B=/tmp/build/stages
# 1. Checks (each line: rc, the stage's verdict).
check() {  # NAME ARGS...
  local name=$1; shift
  timeout 60 "$@" --dtype bf16 --check --backward --iters 0 > $R/check_$name.txt 2>&1
  echo "check $name rc $?: $(tail -1 $R/check_$name.txt)"
}
for st in 08_drop_before_recompute 09_deterministic_products 10_plan_per_batch; do
  check ${st:0:2}_pairs $B/stage$st --n 300 --d 200 --v 20001 --data realistic
  check ${st:0:2}_single $B/stage$st --n 100 --d 200 --v 20001 --data realistic
  check ${st:0:2}_softcap $B/stage$st --n 300 --d 264 --v 5000 --data random --softcap 30 --ignore-frac 0.1
done
check 08_chunks $B/stage08_drop_before_recompute --n 300 --d 200 --v 20001 --data realistic --chunk-rows 4096
check 09_chunks $B/stage09_deterministic_products --n 300 --d 200 --v 20001 --data realistic --chunk-rows 4096
check 10_dense $B/stage10_plan_per_batch --n 300 --d 200 --v 20001 --data random --plan dense
for tool in memcheck racecheck synccheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 1 $B/stage10_plan_per_batch --n 300 --d 200 --v 20001 \
    --dtype bf16 --data realistic --plan sparse --check --backward --iters 0 > $R/sanitizer_$tool.txt 2>&1
  echo "$tool rc $? at $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$tool.txt)"
done
# 2. Bitwise: the same inputs through both gathers.
mkdir -p /tmp/s66/08_fused /tmp/s66/08_separate /tmp/s66/10_fused /tmp/s66/10_separate
for st in 08_drop_before_recompute 10_plan_per_batch; do
  for mode in fused separate; do
    flag=0; [ $mode = separate ] && flag=1
    CCE_EXP_SEPARATE_GATHER=$flag timeout 60 $B/stage$st --n 4096 --d 1024 --v 50257 --dtype bf16 --data realistic \
      --seed 7 --backward --iters 0 --save /tmp/s66/${st:0:2}_$mode > $R/save_${st:0:2}_$mode.txt 2>&1
  done
  for f in loss lse de dc; do
    cmp -s /tmp/s66/${st:0:2}_fused/$f.npy /tmp/s66/${st:0:2}_separate/$f.npy && r=equal || r=DIFFERENT
    echo "bitwise ${st:0:2} $f.npy: $r"
  done
done
echo "checks done $((SECONDS-T0)) s"
# 3. Times, in turns.
for round in 1 2; do
  for mode in fused separate; do
    flag=0; [ $mode = separate ] && flag=1
    filter='^stage10_plan_per_batch/(loss|loss_grad)/'; [ $round = 1 ] && [ $mode = fused ] && \
      filter='^(stage10_plan_per_batch|cublas_floor)/(loss|loss_grad)/'
    [ $((SECONDS-T0)) -gt 470 ] && { echo "bench $mode $round not started"; continue; }
    CCE_EXP_SEPARATE_GATHER=$flag timeout 120 /tmp/build/bench/cce_bench --shapes=llama3,gemma2 \
      --benchmark_filter="$filter" --benchmark_out=$R/bench_${mode}_$round.json --benchmark_out_format=json \
      > $R/bench_${mode}_$round.txt 2>&1
    echo "bench $mode round $round rc $? at $((SECONDS-T0)) s"
    grep -E "_median" $R/bench_${mode}_$round.txt | awk '{print "  ", $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
  done
done
# 4. The rest of the tree, for call 2.
timeout $((590 - (SECONDS-T0))) ninja -C /tmp/build > $R/build_rest.log 2>&1; echo "rest of the build rc $? at $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
