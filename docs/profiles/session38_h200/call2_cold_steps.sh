#!/usr/bin/env bash
# Session 38, calls 2 and 3 (each on a fresh machine; call 3 after a test fix and with cold_steps.py's pass after
# a plain wait): the C++ call's test again (eager_call_cpp.patch applied), then cold_steps.py at lm32k's shape.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi cce_torch_op) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
(cd /tmp/build && ctest -R pytorch.op.eager_call --output-on-failure) > $R/ctest_eager_call.log 2>&1; tail -4 $R/ctest_eager_call.log
timeout 200 python3 docs/profiles/session38_h200/cold_steps.py /tmp/build/python $R/cold_steps.json > $R/cold.txt 2>&1
echo "cold rc $?"; cat $R/cold.txt | cut -c1-300
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
