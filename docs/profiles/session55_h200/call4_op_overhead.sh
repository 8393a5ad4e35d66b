#!/usr/bin/env bash
# Session 55, call 4 (right after call 3 on the same warm machine; run as CCE_COMMIT=<HEAD> bash <this>): the op's
# synchronized and queued overhead at lm32k's and gemma2's shapes (python/op_overhead_probe.py, as sessions 43-49 ran
# it), in three processes, on HEAD's package and C interface (unchanged since session 46).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1 || echo "save lm32k failed"
for k in 1 2 3; do
  timeout $((560 - (SECONDS-T0))) python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe_$k.json > $R/probe_$k.txt 2>&1
  echo "probe $k rc $? at $((SECONDS-T0)) s"; grep -iE "lm32k|gemma2" $R/probe_$k.txt | grep -iE "with_backward|c_call|overhead|%" | head -12
done
cd $OUT && tar czf call4.tgz call4
