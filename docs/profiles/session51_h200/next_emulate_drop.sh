#!/usr/bin/env bash
# For a next session (one H200, a fresh machine, ~450 s): emulate_drop.py's self-check, then the drop's error and the
# decision's measures at every eps on one training of lm128k's and lm32k's models and at the generated shapes, beside
# eager PyTorch's error, and stage 10's own choice (its candidates line) on the same inputs: the data for a budget
# that follows the error rather than the mass (session 51's calls 6 and 7: the mass budget is four candidates too
# cautious at lm128k and one too bold at lm128k_s30).
T0=$SECONDS
R=$OUT/emulate; mkdir -p $R /tmp/cce-inputs
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
python3 docs/profiles/session51_h200/emulate_drop.py --self-check > $R/self_check.txt 2>&1; echo "self-check rc $?"; tail -2 $R/self_check.txt
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_inputs.log 2>&1
$S1 --n 8192 --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/llama3 --save-large --iters 0 >> $R/save_inputs.log 2>&1
$S1 --n 20480 --d 768 --v 50257 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gpt2 --save-large --iters 0 >> $R/save_inputs.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 100 python3 docs/profiles/session51_h200/emulate_drop.py --shapes gemma2,llama3,gpt2 --inputs /tmp/cce-inputs \
  --out $R/emulated_generated.json > $R/emulated_generated.txt 2>&1; echo "generated rc $? at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 400 ]; do sleep 2; done; cat $R/lm_data.rc
timeout 150 python3 docs/profiles/session51_h200/emulate_drop.py --shapes lm128k,lm128k_s300,lm128k_s100,lm128k_s30,lm32k \
  --out $R/emulated_lm.json > $R/emulated_lm.txt 2>&1; echo "lm rc $? at $((SECONDS-T0)) s"
for s in lm128k lm128k_s300 lm128k_s100 lm128k_s30 lm32k ../cce-inputs/gemma2 ../cce-inputs/llama3 ../cce-inputs/gpt2; do
  timeout 30 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 3 > $R/exec_$(basename $s).txt 2>&1
  echo "$s: $(grep -E "drop   |candidates" $R/exec_$(basename $s).txt | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
done
cd $OUT && tar czf emulate.tgz emulate
