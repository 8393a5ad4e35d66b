#!/usr/bin/env bash
# Session 39, call 2, one H200 (warm, call 1's build): the whole GPU suite on the tree with the turns and the twins.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt; git diff --stat > $R/diff_stat.txt
ninja -C /tmp/build > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head; grep -c "(Skipped)" $R/ctest_gpu.log
cd $OUT && tar czf call2.tgz call2
