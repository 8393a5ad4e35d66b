#!/usr/bin/env bash
# Session 63, call 2 (call 1's warm machine and /tmp/build): the whole GPU suite on a2a8a02 (the need bits in the
# work buffer); then, with the time left, stage 10 and the floor at llama3 in four rounds (each process both: the
# ratio to the floor that issue 25's H100 target carries over, 14 / 46.5 = 0.301x).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call2
gpu_suite 430 || exit 1
for round in 1 2 3 4; do
  [ $((SECONDS-T0)) -gt 540 ] && break
  timeout $((585 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=llama3 \
    --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/loss_grad/' \
    --benchmark_out=$R/llama3_ratio_$round.json --benchmark_out_format=json > $R/llama3_ratio_$round.txt 2>&1
  echo "llama3 round $round rc $? at $((SECONDS-T0)) s"
done
python3 docs/profiles/session63_h200/peaks.py $R/llama3_ratio_*.json
cd $OUT && tar czf call2.tgz call2 && rm -rf call2
