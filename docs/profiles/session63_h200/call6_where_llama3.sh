#!/usr/bin/env bash
# Session 63, call 6 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): where stage 10's call goes at llama3 today
# (generated data; session 49's trace predates sessions 50-63): a traced call through the C interface
# (bench/stage_timeline.py --host), and ncu's duration of every kernel of one call (clocks left alone), summed per
# kernel by device_steps/ncu_durations.py.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call6
build /tmp/build . cce_capi stage01_materialized stage10_plan_per_batch > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
/tmp/build/stages/stage01_materialized --n 8192 --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/llama3 --save-large --iters 0 > $R/save_llama3.log 2>&1 || echo "save failed"
timeout 120 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-inputs/llama3 --calls 5 --host \
  --out $R/timeline_llama3.txt > $R/timeline_llama3.log 2>&1
echo "timeline rc $? ($((SECONDS-T0)) s)"; grep -E "^span|^==" $R/timeline_llama3.txt; sed -n '/by name/,/^$/p' $R/timeline_llama3.txt | head -24
timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum /tmp/build/stages/stage10_plan_per_batch --n 8192 \
  --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_llama3_all.txt 2>&1
echo "ncu rc $? ($((SECONDS-T0)) s)"
python3 docs/profiles/device_steps/ncu_durations.py $R/ncu_llama3_all.txt | head -30
cd $OUT && tar czf call6.tgz call6 && rm -rf call6
