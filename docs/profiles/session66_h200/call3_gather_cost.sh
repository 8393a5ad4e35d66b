#!/usr/bin/env bash
# Session 66, call 3 (CCE_COMMIT=<HEAD> bash <this>): where call 2's fused gather loses what it saves. A temporary
# switch, CCE_EXP_GATHER_NO_WAIT=1, lets the producer load tiles without waiting for their rows (the statistics then
# wrong: timing only). 1: ncu (its fixed clocks; SpeedOfLight, MemoryWorkloadAnalysis, WarpStateStats) on stage 10's
# forward kernel and gather at gemma2 and llama3, three modes: fused, separate, fused without waits; 2: cce_bench's
# stage 10 loss + grad at both shapes, fused and without waits, in turns.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call3
build /tmp/build . stage10_plan_per_batch cce_bench > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for dims in "gemma2 2304 256000" "llama3 4096 128256"; do
  set -- $dims
  for mode in fused separate nowait; do
    sep=0; nowait=0; [ $mode = separate ] && sep=1; [ $mode = nowait ] && nowait=1
    CCE_EXP_SEPARATE_GATHER=$sep CCE_EXP_GATHER_NO_WAIT=$nowait timeout 90 ncu --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section WarpStateStats -k regex:'wgmma_pipeline_kernel|gather_rows' -c 2 \
      /tmp/build/stages/stage10_plan_per_batch --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 \
      --backward --plan sparse --iters 0 > $R/ncu_${1}_$mode.txt 2>&1
    echo "$1 $mode ncu rc $? ($((SECONDS-T0)) s)"
    grep -E "^  [a-zA-Z_].*\(|^    (Duration|Compute \(SM\) Throughput|DRAM Throughput|L2 Hit Rate|Memory Throughput|Warp Cycles Per Issued)" \
      $R/ncu_${1}_$mode.txt | sed 's/(CUtensorMap.*//' | cut -c1-110
  done
done
for round in 1 2; do
  for mode in fused nowait; do
    nowait=0; [ $mode = nowait ] && nowait=1
    [ $((SECONDS-T0)) -gt 540 ] && { echo "bench $mode $round not started"; continue; }
    CCE_EXP_GATHER_NO_WAIT=$nowait timeout 60 /tmp/build/bench/cce_bench --shapes=llama3,gemma2 \
      --benchmark_filter='^stage10_plan_per_batch/loss_grad/' --benchmark_out=$R/bench_${mode}_$round.json \
      --benchmark_out_format=json > $R/bench_${mode}_$round.txt 2>&1
    echo "bench $mode round $round rc $? at $((SECONDS-T0)) s"
    grep -E "_median" $R/bench_${mode}_$round.txt | awk '{print "  ", $1, $2, $3}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
  done
done
cd $OUT && tar czf call3.tgz call3 && rm -rf call3
