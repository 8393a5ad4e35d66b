#!/usr/bin/env bash
# Session 29, call 1 (carrying QuACK's first wheel part): build; the whole GPU suite; lm128k's trained data with its
# snapshots (bench/lm_data.py) in the background on the same GPU.
set -o pipefail
T0=$SECONDS
R=$OUT/c1; mkdir -p $R /tmp/q /tmp/s29
cp .quack-wheels/part.00 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c1.tgz -C $OUT c1; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 420 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data_lm128k.log 2>&1
 echo "lm128k rc $? $((SECONDS-T0)) s" > $R/lm128k.rc) &
LM=$!
(cd /tmp/build && timeout $((540 - (SECONDS - T0))) ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run|Total Test" $R/ctest_gpu.log | head
echo "suite $((SECONDS-T0)) s"
while kill -0 $LM 2>/dev/null && [ $((SECONDS-T0)) -lt 570 ]; do sleep 2; done
cat $R/lm128k.rc 2>/dev/null; ls /tmp/cce-lm-data
tar czf $OUT/c1.tgz -C $OUT c1 && rm -r $R
echo "total $((SECONDS-T0)) s"
