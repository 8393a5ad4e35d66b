#!/usr/bin/env bash
# Session 51, call 6 (a fresh machine): is lm128k's eps (2^-13, the first candidate whose mean dropped mass is within
# 0.025) smaller than its errors need? On one training of lm128k's model: the stage executable's candidates line (the
# dropped mass at each eps) at lm128k, lm128k_s300 and lm128k_s30; then peers.py (eager PyTorch in the first run, then
# stage 10's op alone) at lm128k and lm128k_s300 with --drop-eps 2^-9 ... 2^-13 and the automatic eps: time, dE and
# dC error against fp32, beside eager's; and lm128k_s30 at 2^-17 (below the last candidate).
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 400 ]; do sleep 2; done; cat $R/lm_data.rc
S10=/tmp/build/stages/stage10_plan_per_batch
for s in lm128k lm128k_s300 lm128k_s30; do
  timeout 30 $S10 --load /tmp/cce-lm-data/$s --backward --iters 10 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'candidates|kept tiles|time  ' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
IM=peer_torch_eager,stage10_plan_per_batch_op
for e in auto 9 10 11 12 13; do
  [ $((SECONDS-T0)) -gt 500 ] && continue
  flags=""; [ $e != auto ] && flags="--drop-eps $(python3 -c "print(2.0**-$e)")"
  timeout 90 python3 bench/peers.py --shapes lm128k,lm128k_s300 --impls $IM --modes loss_grad --reps 10 \
    --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "$flags" --out $R/peers_eps_$e.json > $R/peers_eps_$e.txt 2>&1
  echo "eps $e rc $? $((SECONDS-T0)) s"; grep -E " ms " $R/peers_eps_$e.txt | cut -c1-170
  IM=stage10_plan_per_batch_op
done
timeout 60 python3 bench/peers.py --shapes lm128k_s30 --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad \
  --reps 10 --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "--drop-eps $(python3 -c "print(2.0**-17)")" \
  --out $R/peers_s30_eps_17.json > $R/peers_s30_eps_17.txt 2>&1
echo "s30 eps 17 rc $? $((SECONDS-T0)) s"; grep -E " ms " $R/peers_s30_eps_17.txt | cut -c1-170
cd $OUT && tar czf call6.tgz call6
