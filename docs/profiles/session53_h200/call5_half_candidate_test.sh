#!/usr/bin/env bash
# Session 53, call 5 (one H200, the last of the session's device time): the GPU test of the automatic eps now puts
# its budget before a half candidate (2^-8.5, 2^-9.5, ...): build the GPU tests and run stage 10's GPU properties,
# printing which candidate each choice test took.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build tests/gpu/test_stages_gpu) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 120 ctest -R "^PlanPerBatch\." -j4 --timeout 100 -V) > $R/ctest_plan_per_batch.log 2>&1
echo "rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_plan_per_batch.log)"; grep -E '\*\*\*Failed|Timeout' $R/ctest_plan_per_batch.log | head
grep -E "budget .*expected eps|picks 2" $R/ctest_plan_per_batch.log | cut -c1-200
