#!/usr/bin/env bash
# Session 38, call 6, two H200 of one host (nvidia-h200-x2): the read-backs owned per stage object and per C
# interface handle (per_owner_read_backs.patch). The op's new two_devices case on the old C interface (the patch
# taken back in a copy of the tree: expected to fail on cuda:1) and on the new; the op's tests; the whole GPU suite,
# stage 11's two-GPU runs among them.
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
P=docs/profiles/session38_h200/per_owner_read_backs.patch
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C /tmp/old-tree
(cd /tmp/old-tree && git apply -R $OLDPWD/$P) > $R/old_tree.log 2>&1; grep -c "static cudaEvent_t done" /tmp/old-tree/python/capi_kernels.cu >> $R/old_tree.log
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; cd $OUT && tar czf call6.tgz call6; exit 1; }
echo "build $((SECONDS-T0)) s"
(cmake -S /tmp/old-tree -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-old cce_capi) > $R/build_old.log 2>&1 || { grep -B2 -A8 error $R/build_old.log | head -20; }
echo "old build $((SECONDS-T0)) s"; cat $R/old_tree.log
timeout 120 python3 tests/pytorch/test_op.py /tmp/build-old/python two_devices > $R/two_devices_old.txt 2>&1; echo "old two_devices rc $?"; grep -v "^ok" $R/two_devices_old.txt | tail -5 | cut -c1-300
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log; grep -A14 "two_devices" $R/ctest_op.log | grep -E "^ok|FAIL|SKIP" | head -12 | cut -c1-200
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head; grep -c "(Skipped)" $R/ctest_gpu.log
cd $OUT && tar czf call6.tgz call6
