#!/usr/bin/env bash
# Session 66, call 2 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): call 1 again after its fix (the counts' item
# sized for V: stage 10's forward into dC runs the whole vocabulary as one chunk, which call 1's item, sized for a
# chunk, did not hold): the checks, the sanitizers, both gathers' outputs byte for byte, then cce_bench's stage 10
# loss + grad at llama3 and gemma2 with the two gathers in turns (three rounds, the floor in the first).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call2
build /tmp/build . > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
B=/tmp/build/stages
check() {  # NAME ARGS...
  local name=$1; shift
  timeout 60 "$@" --dtype bf16 --check --backward --iters 0 > $R/check_$name.txt 2>&1
  echo "check $name rc $?: $(grep -E '^  check  ' $R/check_$name.txt | tail -1 | tr -s ' '); $(grep -E '^  backward ' $R/check_$name.txt | tr -s ' ' | cut -c1-70)"
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
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 1 $B/stage10_plan_per_batch --n 100 --d 200 --v 20001 \
    --dtype bf16 --data realistic --plan sparse --check --backward --iters 0 > $R/sanitizer_$tool.txt 2>&1
  echo "$tool rc $? at $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$tool.txt)"
done
mkdir -p /tmp/s66/10_fused /tmp/s66/10_separate
for mode in fused separate; do
  flag=0; [ $mode = separate ] && flag=1
  CCE_EXP_SEPARATE_GATHER=$flag timeout 60 $B/stage10_plan_per_batch --n 8192 --d 1024 --v 60000 --dtype bf16 \
    --data realistic --seed 7 --backward --iters 3 --save /tmp/s66/10_$mode > $R/save_10_$mode.txt 2>&1
done
for f in loss lse de dc; do
  cmp -s /tmp/s66/10_fused/$f.npy /tmp/s66/10_separate/$f.npy && r=equal || r=DIFFERENT
  echo "bitwise 10 $f.npy: $r"
done
echo "checks done $((SECONDS-T0)) s"
for round in 1 2 3; do
  for mode in fused separate; do
    flag=0; [ $mode = separate ] && flag=1
    filter='^stage10_plan_per_batch/loss_grad/'; [ $round = 1 ] && [ $mode = fused ] && \
      filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/'
    [ $((SECONDS-T0)) -gt 540 ] && { echo "bench $mode $round not started"; continue; }
    CCE_EXP_SEPARATE_GATHER=$flag timeout 60 /tmp/build/bench/cce_bench --shapes=llama3,gemma2 \
      --benchmark_filter="$filter" --benchmark_out=$R/bench_${mode}_$round.json --benchmark_out_format=json \
      > $R/bench_${mode}_$round.txt 2>&1
    echo "bench $mode round $round rc $? at $((SECONDS-T0)) s"
    grep -E "_median|ERROR" $R/bench_${mode}_$round.txt | awk '{print "  ", $1, $2, $3, $4}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##' | cut -c1-150
  done
done
cd $OUT && tar czf call2.tgz call2 && rm -rf call2
