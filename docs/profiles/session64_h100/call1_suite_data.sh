#!/usr/bin/env bash
# Session 64, call 1 (one H100, the kind issue 25's targets name; run as CCE_COMMIT=<HEAD> bash <this>, the device
# copy's git HEAD being stale): bench/lm_data.py trains lm32k's and lm128k's models (their snapshots too) while the
# tree builds; the whole GPU suite on the build; the generated shapes' inputs for peers.py. Nothing is timed here:
# calls 2-4 time the floor, stage 10, stage 06 and the peers on this machine's data.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call1
(timeout 480 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
gpu_suite 530
cp $R/ctest_gpu.log /tmp/s64_suite.log  # call 2 runs what the cut left
save_probe_inputs gpt2 llama3 gemma2 gemma2_flat
echo "inputs at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 575 ]; do sleep 2; done; cat $R/lm_data.rc
ls /tmp/cce-lm-data
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
