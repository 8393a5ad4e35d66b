#!/usr/bin/env bash
# Session 64, call 1 (one H100, the kind issue 25's targets name; run as CCE_COMMIT=<HEAD> bash <this>, the device
# copy's git HEAD being stale): bench/lm_data.py trains lm32k's and lm128k's models (their snapshots too) while the
# tree builds; the whole GPU suite on the build; the generated shapes' inputs for peers.py. Nothing is timed here:
# calls 2-4 time the floor, stage 10, stage 06 and the peers on this machine's data.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call1
mkdir -p /tmp/cce-inputs
(timeout 480 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
gpu_suite 530
cp $R/ctest_gpu.log /tmp/s64_suite.log  # call 2 runs what the cut left
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 60 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 575 ]; do sleep 2; done; cat $R/lm_data.rc
ls /tmp/cce-lm-data
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
