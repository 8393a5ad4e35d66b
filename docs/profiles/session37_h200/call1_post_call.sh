#!/usr/bin/env bash
# Session 37, call 1 (a fresh H200): post_call_probe.py, builds stage 01 and the C interface, makes gemma2 and lm32k inputs.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
if [ ! -f /tmp/build/python/cce_stages/libcce_capi.so ]; then
  (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
fi
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 100 python3 docs/profiles/session37_h200/post_call_probe.py /tmp/build/python $R/post_call.json > $R/post_call.txt 2>&1
echo "rc $?"; cut -c1-400 $R/post_call.txt
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
