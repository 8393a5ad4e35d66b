#!/usr/bin/env bash
# Session 62, call 3 (run as CCE_COMMIT=<HEAD> bash <this>): the op's eager path before and after its loss stopped
# being a tensor argument of _EagerLossAndGrad (no view of it per call), one build: "old" is the build's python/
# folder with main's __init__.py (the C library is the same). op_host_probe.py (lm32k's shape) for each, then
# op_overhead_probe.py (gemma2 and lm32k, synchronized and queued) old, new, old, new. (As run, the line printer was
# inline, now overhead_line.py; "old" failed: the device copy's git lacks this session's commits.)
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call3
build /tmp/build . cce_capi stage01_materialized > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
rm -rf /tmp/py-old && cp -r /tmp/build/python /tmp/py-old
git show ${OLD_INIT:-aa1311f}:python/cce_stages/__init__.py > /tmp/py-old/cce_stages/__init__.py
echo "build $((SECONDS-T0)) s"
save_probe_inputs lm32k gemma2
echo "inputs saved at $((SECONDS-T0)) s"
for tree in old new; do
  dir=/tmp/build/python; [ $tree = old ] && dir=/tmp/py-old
  timeout 100 python3 docs/profiles/session62_h200/op_host_probe.py $dir /tmp/lm-gen/lm32k $R/op_host_probe_$tree.json \
    > $R/op_host_probe_$tree.txt 2>&1
  echo "host probe $tree rc $? at $((SECONDS-T0)) s"; head -20 $R/op_host_probe_$tree.txt
done
for round in 1 2; do
  for tree in old new; do
    dir=/tmp/build/python; [ $tree = old ] && dir=/tmp/py-old
    timeout 100 python3 python/op_overhead_probe.py $dir $R/op_overhead_${tree}_$round.json > $R/op_overhead_${tree}_$round.txt 2>&1
    echo "overhead $tree $round rc $? at $((SECONDS-T0)) s"
    python3 docs/profiles/session62_h200/overhead_line.py $R/op_overhead_${tree}_$round.json
  done
done
