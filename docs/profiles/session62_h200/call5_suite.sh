#!/usr/bin/env bash
# Session 62, call 5 (right after call 4, on its warm machine and /tmp/build): the whole GPU suite on this session's
# last CUDA change (stage 11's release_scratch, the op's one scale launch); stage 11's two-GPU runs skip on one GPU.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call5
[ -x /tmp/build/stages/stage10_plan_per_batch ] || build /tmp/build . > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
(cd /tmp/build && timeout $((560 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"
grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20; grep -E 'Total Test time' $R/ctest_gpu.log
