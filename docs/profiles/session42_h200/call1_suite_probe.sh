#!/usr/bin/env bash
# Session 42, call 1 (one H200): main (e745988) with session 41's outputs_after_sort.patch applied (commit.txt):
# the whole GPU suite; the op's tests; then python/op_overhead_probe.py on the patched tree and on main (the patch
# reversed in a copy, built apart), in turns, while the call's time allows.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
C=$(cat docs/profiles/session42_h200/commit.txt)
{ echo "tree: $C"; git log --oneline -1; git status --short; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log; grep -E "\(Failed\)" $R/ctest_op.log
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session41_h200/outputs_after_sort.patch && cmake -S . -B /tmp/build-main $CM && ninja -C /tmp/build-main) > $R/build_main.log 2>&1 || { tail -20 $R/build_main.log; }
echo "main build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
for turn in 1 2 3; do
  for tree in patched main; do
    [ $((SECONDS-T0)) -lt 520 ] || break 2
    B=/tmp/build/python; [ $tree = main ] && B=/tmp/build-main/python
    timeout 70 python3 python/op_overhead_probe.py $B $R/probe_${tree}_$turn.json > $R/probe_${tree}_$turn.txt 2>&1
    echo "probe $tree $turn rc $? at $((SECONDS-T0)) s"
    python3 docs/profiles/session38_h200/overhead_summary.py $R/probe_${tree}_$turn.json 2>&1 | cut -c1-300
  done
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
