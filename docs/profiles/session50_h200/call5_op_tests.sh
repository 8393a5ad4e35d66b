#!/usr/bin/env bash
# Session 50, call 5 (one H200): the PyTorch op's tests on HEAD (last run in session 46; stage 10 changed since:
# the copy rule, the row gather) and stage 10's round trips through PyTorch at the odd shapes.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call5.tgz call5; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "pytorch\.op\.|pytorch\.stage10_plan_per_batch\.odd" -j4 --timeout 150 --output-on-failure) > $R/ctest_op.log 2>&1
echo "ctest rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|Skipped|Failed|Timeout" $R/ctest_op.log | head
cd $OUT && tar czf call5.tgz call5
