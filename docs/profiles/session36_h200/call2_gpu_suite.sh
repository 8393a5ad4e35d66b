#!/usr/bin/env bash
# Session 36, call 2 (warm; carries the second third of QuACK's wheels' tar, .quack-wheels/s36/q.01): the whole GPU
# suite on call 1's tree (wip/s36).
set -o pipefail
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/q
cp .quack-wheels/s36/q.01 /tmp/q/ 2>/dev/null
git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
ninja -C /tmp/build > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
(cd /tmp/build && timeout 480 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head -20
ls -la /tmp/q
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
