#!/usr/bin/env bash
# Session 39, call 3, two H200 of one host (nvidia-h200-x2), the tree of 379d621 (the turns, the twins): the op's
# tests (two_devices, threads and streams among them), stage 11's tests (its two-GPU runs), then the op's overhead
# at lm32k's and gemma2's shapes (python/op_overhead_probe.py) with the new package and with the old one
# (turns.patch taken back in a copy of the tree), one process each, new first.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "pytorch.op|stage11" -j4 --timeout 300 --output-on-failure) > $R/ctest_op_stage11.log 2>&1
echo "op and stage 11 tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op_stage11.log; grep -E "\*\*\*Failed|Skipped|Timeout" $R/ctest_op_stage11.log | head
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 150 python3 python/op_overhead_probe.py /tmp/build/python $R/probe_new.json > $R/probe_new.txt 2>&1
echo "probe new rc $? at $((SECONDS-T0)) s"; python3 docs/profiles/session38_h200/overhead_summary.py $R/probe_new.json
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C /tmp/old-tree
(cd /tmp/old-tree && git apply -R $OLDPWD/docs/profiles/session39_h200/turns.patch) > $R/old_tree.log 2>&1
git show aba5fa7:python/op_overhead_probe.py > /tmp/old_probe.py  # the probe as it called the old package's internals
(cmake -S /tmp/old-tree -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-old cce_capi) > $R/build_old.log 2>&1 || grep -B2 -A8 error $R/build_old.log | head -20
echo "old build at $((SECONDS-T0)) s"
timeout 150 python3 /tmp/old_probe.py /tmp/build-old/python $R/probe_old.json > $R/probe_old.txt 2>&1
echo "probe old rc $? at $((SECONDS-T0)) s"; python3 docs/profiles/session38_h200/overhead_summary.py $R/probe_old.json
cd $OUT && tar czf call3.tgz call3
