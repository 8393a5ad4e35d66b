#!/usr/bin/env bash
# Session 39, call 1, one H200: the op's new threads and streams cases on the old C interface and package
# (turns.patch taken back in a copy of the tree: expected to fail) and on the new; then all of the op's tests.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
P=docs/profiles/session39_h200/turns.patch
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C /tmp/old-tree
(cd /tmp/old-tree && git apply -R $OLDPWD/$P) > $R/old_tree.log 2>&1; grep -c "_error_buffer" /tmp/old-tree/python/cce_stages/__init__.py >> $R/old_tree.log
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cmake -S /tmp/old-tree -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-old cce_capi) > $R/build_old.log 2>&1 || { grep -B2 -A8 error $R/build_old.log | head -20; }
echo "old build $((SECONDS-T0)) s"; cat $R/old_tree.log
for c in threads streams; do
  timeout 150 python3 tests/pytorch/test_op.py /tmp/build-old/python $c > $R/${c}_old.txt 2>&1; echo "old $c rc $?"; grep -v "^ok" $R/${c}_old.txt | tail -6 | cut -c1-300
done
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log; grep -E "^FAIL|SKIPPED" $R/ctest_op.log | head -12 | cut -c1-300
for c in threads streams; do python3 tests/pytorch/test_op.py /tmp/build/python $c > $R/${c}_new.txt 2>&1; echo "new $c rc $?"; tail -3 $R/${c}_new.txt | cut -c1-200; done
cd $OUT && tar czf call1.tgz call1
