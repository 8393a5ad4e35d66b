#!/usr/bin/env bash
# Session 41, call 5 (one H200): where stage 10's call that decides again on a sample spends its time, at
# gemma2_flat (random data): bench/stage_timeline.py traces the last of 17 calls (call 1 decides on the whole
# batch, calls 2-16 run the dense plan before the forward, call 17 decides on a sample of 1024 rows first), and the
# last of 16 (a plain dense call) for comparison. The tree is named in status.txt.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R /tmp/flat
{ echo "tree: $(cat docs/profiles/session41_h200/commit.txt)"; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call5.tgz call5; exit 1; }
echo "build $((SECONDS-T0)) s"
/tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/flat --save-large --iters 0 > $R/save.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
for calls in 17 16; do
  timeout 150 python3 bench/stage_timeline.py /tmp/build/python /tmp/flat --calls $calls --host --out $R/timeline_calls$calls.txt > $R/timeline_calls$calls.log 2>&1
  echo "calls $calls rc $? at $((SECONDS-T0)) s"
done
cd $OUT && tar czf call5.tgz call5
