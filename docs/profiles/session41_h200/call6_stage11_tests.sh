#!/usr/bin/env bash
# Session 41, call 6 (two H200): stage 11's tests after its sample plan moved to the constructor (the tree named in
# status.txt), the two-GPU runs among them.
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
{ echo "tree: $(cat docs/profiles/session41_h200/commit.txt)"; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call6.tgz call6; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "stage11" -j4 --timeout 200 --output-on-failure) > $R/ctest_stage11.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_stage11.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_stage11.log | head
cd $OUT && tar czf call6.tgz call6
