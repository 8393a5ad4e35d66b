#!/usr/bin/env bash
# Session 52, call 1 (two H200): the whole GPU suite on the tree submitted (owed since 430eaf8 changed stage 11's
# host code), then stage 11's two-GPU tests, which one GPU skips, twice under ctest -j4.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; python3 -c 'import torch; print("torch sees", torch.cuda.device_count(), "GPUs")'; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -E "_2gpu" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_gpu.log | head
for round in 1 2; do
  [ $((SECONDS-T0)) -gt 500 ] && continue
  (cd /tmp/build && ctest -R "_2gpu" -j4 --timeout 120) > $R/ctest_2gpu_$round.log 2>&1
  echo "2gpu round $round rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_2gpu_$round.log) $(grep -E '\*\*\*Failed|Timeout|Skipped' $R/ctest_2gpu_$round.log | sed 's/.*stage11_sharded_vocabulary.//; s/ .*//' | tr '\n' ' ')"
done
echo "total $((SECONDS-T0)) s"
