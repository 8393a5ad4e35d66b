#!/usr/bin/env bash
# Session 42, call 2 (two H200): the tree submitted (commit.txt: PlanHistory::decided and KeptPairs::fraction, host
# code of stages 10 and 11): the whole GPU suite (stage 11's two-GPU runs among them) and the op's tests.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
C=$(cat docs/profiles/session42_h200/commit.txt)
{ echo "tree: $C"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout|Skipped" $R/ctest_gpu.log | head -20
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log; grep -E "\(Failed\)|Skipped" $R/ctest_op.log
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
