#!/usr/bin/env bash
# Session 53, call 2 (one H200, warm after call 1, whose lm128k training it reuses): session 52's
# next_half_step_eps.sh: peers.py (eager PyTorch, then stage 10's op with a fixed eps) at lm128k and lm128k_s300
# with --drop-eps 2^-12, 2^-12.5, 2^-13, 10 reps: time, dE and dC against eager's on the same inputs.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
[ -f /tmp/cce-lm-data/lm128k/E.npy ] || ls /tmp/cce-lm-data/lm128k > $R/missing.txt 2>&1
[ -x /tmp/build/stages/stage10_plan_per_batch ] || { echo "not warm: no build"; exit 1; }
IM=peer_torch_eager,stage10_plan_per_batch_op
for e in 12 12.5 13; do
  timeout 150 python3 bench/peers.py --shapes lm128k,lm128k_s300 --impls $IM --modes loss_grad --reps 10 \
    --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "--drop-eps $(python3 -c "print(2.0**-$e)")" \
    --out $R/peers_eps_$e.json > $R/peers_eps_$e.txt 2>&1
  echo "eps 2^-$e rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_eps_$e.txt | cut -c1-170
  IM=stage10_plan_per_batch_op
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
