#!/usr/bin/env bash
# Prepared for the next session's first call (session 32 ran out of device time): the two GPU mutants of the dense
# chunks' target entry, never run on a device (call 6 reached the first one's baseline: 55 tests, 51 s), and the
# whole GPU suite on the tree after 08c7ca3 (the test helper row_logits shared since; no CUDA change).
set -o pipefail
T0=$SECONDS
R=$OUT/next; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 300 python3 scripts/mutants.py --gpu --only g10_q_target_entry_zero --build-dir /tmp/mut > $R/mutant_zero.txt 2>&1
echo "g10_q_target_entry_zero rc $?: $(tail -3 $R/mutant_zero.txt | tr '\n' ' ')"
timeout 200 python3 scripts/mutants.py --gpu --only g10_q_target_entry_unscaled --build-dir /tmp/mut > $R/mutant_unscaled.txt 2>&1
echo "g10_q_target_entry_unscaled rc $?: $(tail -3 $R/mutant_unscaled.txt | tr '\n' ' ')"
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_gpu.log | head; echo "total $((SECONDS-T0)) s"
