#!/usr/bin/env bash
# Session 37, call 2 (the machine of call 1 if warm): host_after_wait.py under four scheduling flags, one process each.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
if [ ! -f /tmp/build/python/cce_stages/libcce_capi.so ]; then
  (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
fi
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "ready at $((SECONDS-T0)) s"; lscpu | head -20 > $R/lscpu.txt; cat /proc/cmdline > $R/cmdline.txt 2>&1
for s in auto spin yield blocking; do
  timeout 60 python3 docs/profiles/session37_h200/host_after_wait.py /tmp/build/python $R/host_$s.json $s > $R/host_$s.txt 2>&1
  echo "$s rc $?"; cut -c1-600 $R/host_$s.txt
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
