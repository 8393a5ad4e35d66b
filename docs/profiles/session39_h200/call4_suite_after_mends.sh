#!/usr/bin/env bash
# Session 39, call 4, one H200: the whole GPU suite and the op's tests after reading the change again
# (radix_sort's device index, stage 10's whole-vocabulary plan folded into its caller).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head; grep -c "(Skipped)" $R/ctest_gpu.log
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
cd $OUT && tar czf call4.tgz call4
