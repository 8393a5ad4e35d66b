#!/usr/bin/env bash
# Session 49, call 4 (one H200): session 48's dense_prepare.patch (branch wip/s48-dense-prepare) applied to main's
# HEAD: stage 11 makes what a step allocates on every GPU before any GPU enqueues a collective. Its two-GPU tests
# need two GPUs (not lent this session); here every test of stage 11 that one GPU runs (the stage table's, the
# sharded stage's own, the op's), to show the change keeps them passing.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "stage11|Shard" -j4 --timeout 300) > $R/ctest_stage11.log 2>&1
echo "ctest rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_stage11.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_stage11.log | head
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
