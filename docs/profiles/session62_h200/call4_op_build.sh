#!/usr/bin/env bash
# Session 62, call 4 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): everything built in /tmp/build (call 5
# runs the GPU suite there), and beside it the C interface of main's op ("old": op_before.patch reversed, main
# 6c99fb5's python/) in /tmp/build-old. The op's tests; op_host_probe.py at lm32k's shape, old and new; then
# op_overhead_probe.py (gemma2 and lm32k, synchronized and queued) old, new, old, new.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call4
tree_without /tmp/old-tree docs/profiles/session62_h200/op_before.patch
build /tmp/build-old /tmp/old-tree cce_capi > $R/build_old.log 2>&1 &
build /tmp/build . > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
wait; echo "builds $((SECONDS-T0)) s: old $(tail -1 $R/build_old.log)"
save_probe_inputs lm32k gemma2
(cd /tmp/build && timeout 150 ctest -L pytorch -R pytorch.op -j2 --timeout 140) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
for tree in old new; do
  dir=/tmp/build/python; [ $tree = old ] && dir=/tmp/build-old/python
  timeout 60 python3 docs/profiles/session62_h200/op_host_probe.py $dir /tmp/lm-gen/lm32k $R/op_host_probe_$tree.json \
    > $R/op_host_probe_$tree.txt 2>&1
  echo "host probe $tree rc $? at $((SECONDS-T0)) s"; grep -E '^(forward|backward|trivial|scaled)' $R/op_host_probe_$tree.txt | grep -v single
done
for round in 1 2; do
  for tree in old new; do
    dir=/tmp/build/python; [ $tree = old ] && dir=/tmp/build-old/python
    timeout 60 python3 python/op_overhead_probe.py $dir $R/op_overhead_${tree}_$round.json > $R/op_overhead_${tree}_$round.txt 2>&1
    echo "overhead $tree $round rc $? at $((SECONDS-T0)) s"
    python3 docs/profiles/session62_h200/overhead_line.py $R/op_overhead_${tree}_$round.json
  done
done
cd $OUT && tar czf call4.tgz call4 && rm -rf call4
