#!/usr/bin/env bash
# Session 62, call 2 (run as CCE_COMMIT=<HEAD> bash <this>): op_host_probe.py at lm32k's shape (the op's host time
# around and after its C call, split), on a build of the C interface alone.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call2
build /tmp/build . cce_capi stage01_materialized > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
save_probe_inputs lm32k
timeout 200 python3 docs/profiles/session62_h200/op_host_probe.py /tmp/build/python /tmp/lm-gen/lm32k \
  $R/op_host_probe.json > $R/op_host_probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; head -24 $R/op_host_probe.txt; grep -A34 -- '-----' $R/op_host_probe.txt | head -40
