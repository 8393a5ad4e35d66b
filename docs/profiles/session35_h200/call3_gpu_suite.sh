#!/usr/bin/env bash
# Session 35, call 3 (warm; carries QuACK's part.02): the whole GPU suite on the tree, then QuACK's wheels unpacked.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
ninja -C /tmp/build > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
(cd /tmp/build && timeout 420 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head -20
if [ ! -d /tmp/qsite/quack ] && [ -f /tmp/q/part.00 ] && [ -f /tmp/q/part.01 ]; then
  cat /tmp/q/part.00 /tmp/q/part.01 .quack-wheels/part.02 > /tmp/q/cu13.whl
  for w in /tmp/q/cu13.whl /tmp/q/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
fi
ls /tmp/qsite | head -3
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
