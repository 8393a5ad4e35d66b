#!/usr/bin/env bash
# Session 55, call 6 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): lm32k's and lm128k's models trained
# again (one process each, side by side) while the tree builds, the generated shapes' inputs, then grouping_probe.py
# with stage 10's choice of eps per order (the budget on R). Nothing timed.
T0=$SECONDS
R=$OUT/call6; mkdir -p $R /tmp/cce-inputs
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized) > $R/build.log 2>&1 || echo "build failed"
for s in "gpt2 20480 768 50257" "llama3 8192 4096 128256" "gemma2 8192 2304 256000"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data realistic --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"
P=docs/profiles/session55_h200/grouping_probe.py
probe() { timeout $((585 - (SECONDS-T0))) python3 $P "$@" >> $R/probe.txt 2>&1 || echo "probe $2 failed"; }
probe /tmp/cce-inputs/gemma2 --label gemma2 --log2-eps -8 --out $R/grouping_gemma2.json
probe /tmp/cce-inputs/llama3 --label llama3 --log2-eps -8 --out $R/grouping_llama3.json
probe /tmp/cce-inputs/gpt2 --label gpt2 --log2-eps -8 --out $R/grouping_gpt2.json
wait; cat $R/lm_data_*.rc
probe /tmp/cce-lm-data/lm128k --label lm128k --log2-eps -13 --out $R/grouping_lm128k.json
probe /tmp/cce-lm-data/lm32k --label lm32k --log2-eps -9 --out $R/grouping_lm32k.json
probe /tmp/cce-lm-data/lm128k_s300 --label lm128k_s300 --log2-eps -12.5 --out $R/grouping_lm128k_s300.json
probe /tmp/cce-lm-data/lm128k_s100 --label lm128k_s100 --log2-eps -15 --out $R/grouping_lm128k_s100.json
probe /tmp/cce-lm-data/lm128k_s30 --label lm128k_s30 --log2-eps -17 --out $R/grouping_lm128k_s30.json
grep "as stage 10 chooses\|Error\|error" $R/probe.txt; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call6.tgz call6
