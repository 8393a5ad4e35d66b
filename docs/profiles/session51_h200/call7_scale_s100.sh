#!/usr/bin/env bash
# Session 51, call 7 (a fresh machine: call 6's was given back; so lm128k is trained again, another training than
# call 6's): logit_scale.py at lm128k's snapshots, then peers.py (eager, then stage 10's op) at lm128k_s100 with the
# automatic eps and --drop-eps 2^-12, 2^-13, 2^-14.
T0=$SECONDS
R=$OUT/call7; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 &
timeout 250 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
echo "lm_data rc $? at $((SECONDS-T0)) s"; wait; echo "build done at $((SECONDS-T0)) s"
timeout 90 python3 docs/profiles/session51_h200/logit_scale.py /tmp/cce-lm-data lm128k lm128k_s300 lm128k_s100 lm128k_s30 lm128k_s0 > $R/logit_scale.txt 2>&1
echo "scale rc $? $((SECONDS-T0)) s"; cat $R/logit_scale.txt | tail -6; cp /tmp/cce-lm-data_scale.json $R/ 2>/dev/null
IM=peer_torch_eager,stage10_plan_per_batch_op
for e in auto 12 13 14; do
  [ $((SECONDS-T0)) -gt 290 ] && continue
  flags=""; [ $e != auto ] && flags="--drop-eps $(python3 -c "print(2.0**-$e)")"
  timeout 60 python3 bench/peers.py --shapes lm128k_s100 --impls $IM --modes loss_grad --reps 10 \
    --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "$flags" --out $R/peers_s100_eps_$e.json > $R/peers_s100_eps_$e.txt 2>&1
  echo "eps $e rc $? $((SECONDS-T0)) s"; grep -E " ms " $R/peers_s100_eps_$e.txt | cut -c1-170
  IM=stage10_plan_per_batch_op
done
cd $OUT && tar czf call7.tgz call7
