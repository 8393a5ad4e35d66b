#!/usr/bin/env bash
# Session 30, call 1 (carrying QuACK's first wheel part): build; lm128k's trained data with its snapshots
# (bench/lm_data.py --only lm128k) in the background; the op's tests (ctest -L pytorch) beside it on the same GPU.
set -o pipefail
T0=$SECONDS
R=$OUT/c1; mkdir -p $R /tmp/q /tmp/s30
cp .quack-wheels/part.00 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c1.tgz -C $OUT c1; exit 1; }
echo "build $((SECONDS-T0)) s"
# bench/dense_head_probe.py on small odd inputs (its first run: call 2 runs it at the benchmark shapes)
/tmp/build/stages/stage01_materialized --n 777 --d 100 --v 11290 --dtype bf16 --data realistic --seed 7 --save /tmp/small --iters 0 > $R/save_small.log 2>&1
timeout 60 python3 bench/dense_head_probe.py /tmp/small --out $R/probe_small.json > $R/probe_small.txt 2>&1; echo "probe small rc $?"; cut -c1-200 $R/probe_small.txt | tail -12
(timeout 400 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data_lm128k.log 2>&1
 echo "lm128k rc $? $((SECONDS-T0)) s" > $R/lm128k.rc) &
LM=$!
(cd /tmp/build && timeout $((530 - (SECONDS - T0))) ctest -L pytorch -j3 --timeout 300 > $R/ctest_pytorch.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run|Total Test" $R/ctest_pytorch.log | head
echo "op tests $((SECONDS-T0)) s"
while kill -0 $LM 2>/dev/null && [ $((SECONDS-T0)) -lt 575 ]; do sleep 2; done
cat $R/lm128k.rc 2>/dev/null; ls /tmp/cce-lm-data
tar czf $OUT/c1.tgz -C $OUT c1 && rm -r $R
echo "total $((SECONDS-T0)) s"
