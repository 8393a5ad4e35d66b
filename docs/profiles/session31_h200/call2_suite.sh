#!/usr/bin/env bash
# Session 31, call 2 (a fresh machine or call 1's: configure and build): the whole GPU suite on the tree
# with slab_columns_within and the new DenseHeadOverSeveralSlabs; then the mutant that survived call 1 again.
set -o pipefail
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run|Total Test" $R/ctest_gpu.log | head
echo "suite done $((SECONDS-T0)) s"
timeout 150 python3 scripts/mutants.py --gpu --only g10_head_de_overwritten --build-dir /tmp/mut --json $R/mutant.json > $R/mutant.txt 2>&1
echo "mutant rc $?"; tail -4 $R/mutant.txt
echo "total $((SECONDS-T0)) s"
