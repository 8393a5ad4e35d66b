#!/usr/bin/env bash
# Session 52, call 5 (one H200, the session's last 245 s): lm32k's eps under the budget on the misplaced mass, which
# calls 3 and 4 did not train: one training of lm32k's model, the stage executable's candidates line and time there,
# then peers.py (eager PyTorch and stage 10's op, 10 reps) if time is left.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 140 python3 bench/lm_data.py --only lm32k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 145 ]; do sleep 1; done; cat $R/lm_data.rc
timeout 20 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/lm32k --backward --iters 20 > $R/exec_lm32k.txt 2>&1
echo "lm32k: $(grep -E 'drop   |candidates|backward  |time  ' $R/exec_lm32k.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
timeout 40 python3 bench/peers.py --shapes lm32k --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad \
  --reps 10 --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --out $R/peers_lm32k.json > $R/peers_lm32k.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_lm32k.txt | cut -c1-200
