#!/usr/bin/env bash
# Session 62, call 6 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): op_overhead_probe.py on this tree, in
# turns: autograd's default (backward on the device's thread), then --backward-on-calling-thread (the user's
# torch.autograd.set_multithreading_enabled(False)), two rounds. Does the op's synchronized overhead at lm32k's shape
# come within 3% when no thread is woken?
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call6
build /tmp/build . cce_capi stage01_materialized > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
save_probe_inputs lm32k gemma2
echo "built and saved at $((SECONDS-T0)) s"
for round in 1 2; do
  for mode in device_thread calling_thread; do
    flag=""; [ $mode = calling_thread ] && flag=--backward-on-calling-thread
    timeout 60 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_${mode}_$round.json $flag \
      > $R/op_overhead_${mode}_$round.txt 2>&1
    echo "$mode $round rc $? at $((SECONDS-T0)) s"
    python3 docs/profiles/session62_h200/overhead_line.py $R/op_overhead_${mode}_$round.json
  done
done
cd $OUT && tar czf call6.tgz call6 && rm -rf call6
