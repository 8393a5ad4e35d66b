#!/usr/bin/env bash
# Session 64, call 6 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): where stage 10's call goes at llama3 and
# gemma2 on the H100 that issue 25's targets name (session 63's call 6 traced llama3 on an H200): a traced call through
# the C interface (bench/stage_timeline.py --host), and ncu's duration of every kernel of one call (clocks left alone),
# summed per kernel by device_steps/ncu_durations.py.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call6
build /tmp/build . cce_capi stage01_materialized stage10_plan_per_batch > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
save_probe_inputs llama3 gemma2
for shape in llama3 gemma2; do
  timeout 120 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-inputs/$shape --calls 5 --host \
    --out $R/timeline_$shape.txt > $R/timeline_$shape.log 2>&1
  echo "$shape timeline rc $? ($((SECONDS-T0)) s)"; grep -E "^span|^==" $R/timeline_$shape.txt
done
for dims in "llama3 4096 128256" "gemma2 2304 256000"; do
  set -- $dims
  [ $((SECONDS-T0)) -gt 400 ] && { echo "ncu $1 not started"; continue; }
  timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum /tmp/build/stages/stage10_plan_per_batch \
    --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_$1_all.txt 2>&1
  echo "ncu $1 rc $? ($((SECONDS-T0)) s)"
  python3 docs/profiles/device_steps/ncu_durations.py $R/ncu_$1_all.txt | head -12
done
cd $OUT && tar czf call6.tgz call6 && rm -rf call6
