#!/usr/bin/env bash
# For the next session (not run yet; CCE_COMMIT=<HEAD> bash <this> on a fresh machine, best an H100, the GPU issue 25
# names): session 66's gather in the pipeline, what it could not run. 1: its two new GPU mutants (common/tile's
# wait and mean, units.cuh's order is a CPU mutant); 2: cce_bench's stage 10 loss + grad at llama3 and gemma2 beside
# the floor, three rounds (the 14 and 16 ms); the separate gather is gone from the tree, so no A/B here:
# session 66's call 2 compared them on an H200.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start next
build /tmp/build . stage10_plan_per_batch cce_bench > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for round in 1 2 3; do
  filter='^stage10_plan_per_batch/loss_grad/'; [ $round = 1 ] && filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/'
  timeout 90 /tmp/build/bench/cce_bench --shapes=llama3,gemma2 --benchmark_filter="$filter" \
    --benchmark_out=$R/bench_$round.json --benchmark_out_format=json > $R/bench_$round.txt 2>&1
  echo "bench round $round rc $? at $((SECONDS-T0)) s"
  grep -E "_median" $R/bench_$round.txt | awk '{print "  ", $1, $2, $3}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
done
timeout $((590 - (SECONDS-T0))) python3 scripts/mutants.py --gpu --only g_gather_loads_without_waiting \
  --only g_gather_mean_of_a_full_tile --build-dir /tmp/mb > $R/mutants.log 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s: $(grep -E 'mutants caught' $R/mutants.log)"
cd $OUT && tar czf next.tgz next && rm -rf next
