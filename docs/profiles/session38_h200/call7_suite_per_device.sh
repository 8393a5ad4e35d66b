#!/usr/bin/env bash
# Session 38, call 7, two H200 of one host: the tile engine's device facts and resident clusters asked per device
# (the tree of the commit after 58fc09b); the whole GPU suite (stage 11's two-GPU runs among them) and the op's tests.
T0=$SECONDS
R=$OUT/call7; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt; git diff > $R/diff.patch
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; cd $OUT && tar czf call7.tgz call7; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head; grep -c "(Skipped)" $R/ctest_gpu.log
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
rm -f $R/build.log; cd $OUT && tar czf call7.tgz call7
