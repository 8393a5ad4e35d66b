#!/usr/bin/env bash
# Session 40, call 4 (two H200): after the driver's reordering (b2fb130): stage 11's tests, and gemma2_flat at P=2
# with --compare-single, whose every-step peak on GPU 0 is now the shards' own.
set -uo pipefail
R=$OUT/call4; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
(cd /tmp/build && ctest -R stage11 -j4 --timeout 300 > $R/ctest_stage11.log 2>&1)
grep -E "tests passed|\(Failed\)|Total Test" $R/ctest_stage11.log
CCE_COMMIT=b2fb130 /tmp/build/stages/stage11_sharded_vocabulary --backward --n 8192 --d 2304 --v 256000 --data random --gpus 2 \
  --compare-single --iters 20 --json $R/gemma2_flat_p2.json > $R/gemma2_flat_p2.txt 2>&1
grep -E "^  (time|memory|check)" $R/gemma2_flat_p2.txt
