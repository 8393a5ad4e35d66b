#!/usr/bin/env bash
# Session 48, call 5 (two H200): the fix for call 4's deadlock (common/check.cpp: one lock per device for the
# per-kernel answers; stage 11's main loads every kernel eagerly unless CUDA_MODULE_LOADING is set), on the tree of
# calls 1-4 plus the fix. The forced-sparse two-GPU command line 8 times with CUDA_MODULE_LOADING=LAZY (the lock
# alone) and 8 times without it (eager), a run alive after 20 s counted as a hang and its stacks taken; then the
# whole GPU suite on both GPUs (its two-GPU cases included).
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call5.tgz call5; exit 1; }
echo "build $((SECONDS-T0)) s"
ARGS="--check --backward --iters 0 --compare-single --gpus 2 --skip-missing-gpus --n 77 --d 100 --v 1129 --plan sparse --softcap 30"
for mode in lazy eager; do
  ok=0; hung=0; failed=0
  for i in $(seq 1 8); do
    [ $((SECONDS-T0)) -gt 150 ] && break
    S=$SECONDS
    if [ $mode = lazy ]; then
      CUDA_MODULE_LOADING=LAZY stdbuf -oL /tmp/build/stages/stage11_sharded_vocabulary $ARGS > $R/run_${mode}_$i.txt 2>&1 &
    else
      stdbuf -oL /tmp/build/stages/stage11_sharded_vocabulary $ARGS > $R/run_${mode}_$i.txt 2>&1 &
    fi
    PID=$!
    while kill -0 $PID 2>/dev/null && [ $((SECONDS-S)) -lt 20 ]; do sleep 0.2; done
    if kill -0 $PID 2>/dev/null; then
      hung=$((hung+1))
      timeout 40 cuda-gdb -batch -p $PID -ex "set pagination off" -ex "thread apply all bt 30" -ex "detach" > $R/stacks_${mode}_$i.txt 2>&1
      kill -9 $PID; wait $PID 2>/dev/null
    else
      wait $PID; rc=$?; if [ $rc = 0 ] && grep -q "check +PASSED\|check  *PASSED" $R/run_${mode}_$i.txt; then ok=$((ok+1)); else failed=$((failed+1)); fi
    fi
  done
  echo "$mode: passed $ok, hung $hung, failed $failed ($((SECONDS-T0)) s)"
done
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 200) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout|Skipped\)" $R/ctest_gpu.log | head -20
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call5.tgz call5
