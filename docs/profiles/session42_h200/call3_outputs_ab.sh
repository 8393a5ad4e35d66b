#!/usr/bin/env bash
# Session 42, call 3 (one H200): main's tree at a16f74c with session 41's outputs_after_sort.patch applied: the op's
# two ways of making its outputs in turns in one process (outputs_ab.py), three processes.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
{ echo "tree: a16f74c with docs/profiles/session41_h200/outputs_after_sort.patch applied"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
for k in 1 2 3; do
  timeout 150 python3 docs/profiles/session42_h200/outputs_ab.py /tmp/build/python $R/outputs_ab_$k.json 200 > $R/outputs_ab_$k.txt 2>&1
  echo "process $k rc $? at $((SECONDS-T0)) s"; cat $R/outputs_ab_$k.txt | cut -c1-200
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
