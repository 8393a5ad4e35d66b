#!/usr/bin/env bash
# Session 64, call 2 (call 1's warm machine: its build, training and inputs in /tmp): the suite's tests that call 1
# left unfinished, if any (steps.sh's gpu_suite_rest); the PyTorch op's tests; one cce_bench run: the
# cuBLAS floor and stage 10 (loss alone and loss + grad) at every shape of the tables, stage 06 at gemma2_flat (loss +
# grad: issue 25's <= 70 ms). Calls 3 and 4 take its floor for the peers' x floor.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call2
mkdir -p /tmp/s64
gpu_suite_rest /tmp/s64_suite.log 250
(cd /tmp/build && timeout $((260 - (SECONDS-T0))) ctest -L pytorch -R pytorch.op -j2 --timeout 200) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
S=gpt2,llama3,gemma2,gemma2_flat,gemma2_softcap,lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout $((585 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^((stage10_plan_per_batch|cublas_floor)/(loss|loss_grad)/|stage06_fused_backward/loss_grad/gemma2_flat/)' \
  --benchmark_out=/tmp/s64/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s64/bench.json $R/
grep -E "_median" $R/bench.txt | awk '{print $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2 && rm -rf call2
