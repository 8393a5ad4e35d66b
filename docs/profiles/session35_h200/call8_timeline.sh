#!/usr/bin/env bash
# Session 35, call 8 (a fresh machine, the session's last 245 s of device time): build the op alone; then
# calls_in_a_row_timeline.py (beside this script; the call ran it as bench/call_timeline.py): stage 10's op, loss + gradient, 12 calls in a row, the last 4 under torch.profiler, at
# gemma2_flat's shape (random data, --plan dense) and lm32k's (random data, the default plan): how much of a call
# is idle GPU between its kernels, and around which waits.
set -o pipefail
T0=$SECONDS
R=$OUT/call8; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build cce_capi) > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 100 python3 docs/profiles/session35_h200/calls_in_a_row_timeline.py --cce-python /tmp/build/python --shapes gemma2_flat --flags "--plan dense" \
  --out $R/timeline_gemma2_flat.json 2>&1 | tee $R/timeline_gemma2_flat.txt
timeout 60 python3 docs/profiles/session35_h200/calls_in_a_row_timeline.py --cce-python /tmp/build/python --shapes lm32k \
  --out $R/timeline_lm32k.json 2>&1 | tee $R/timeline_lm32k.txt
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call8.tgz call8
