#!/usr/bin/env bash
# For a next session (one H200, ~420 s; prepared in session 52, not run): before building candidates half an
# exponent apart (stage 10's WORKLOG, session 52, last paragraph), measure what 2^-12.5 gives where 2^-12 and 2^-13
# disagree: one training of lm128k's model, then peers.py (eager PyTorch first, then stage 10's op with a fixed eps)
# at lm128k and lm128k_s300 with --drop-eps 2^-12, 2^-12.5 and 2^-13, 10 reps: time, dE and dC against eager's on
# the same inputs; and the stage executable's automatic choice there (its candidates line) for the R of each.
T0=$SECONDS
R=$OUT/half; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 320 ]; do sleep 2; done; cat $R/lm_data.rc
for s in lm128k lm128k_s300; do
  timeout 30 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 10 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'drop   |candidates|time  ' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
IM=peer_torch_eager,stage10_plan_per_batch_op
for e in 12 12.5 13; do
  timeout 80 python3 bench/peers.py --shapes lm128k,lm128k_s300 --impls $IM --modes loss_grad --reps 10 \
    --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "--drop-eps $(python3 -c "print(2.0**-$e)")" \
    --out $R/peers_eps_$e.json > $R/peers_eps_$e.txt 2>&1
  echo "eps 2^-$e rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_eps_$e.txt | cut -c1-170
  IM=stage10_plan_per_batch_op
done
cd $OUT && tar czf half.tgz half
