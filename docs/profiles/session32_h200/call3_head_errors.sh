#!/usr/bin/env bash
# Session 32, call 3: the sparse plan's dense head (--dense-head 0.5) against none on lm128k's trained snapshots:
# dE and dC errors against fp32 (peers.py, eager PyTorch in the same process) and time. Build; lm128k's data
# (bench/lm_data.py, alone on the GPU); peers.py with --stage-flags "" then "--dense-head 0.5"; the stage executable
# with and without the head in turns while time is left.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 300 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
echo "lm_data rc $? $((SECONDS-T0)) s"
SH=lm128k_s30,lm128k_s100,lm128k,lm128k_s300
for flags in "" "--dense-head 0.5"; do
  tag=$([ -z "$flags" ] && echo none || echo head05)
  timeout 150 python3 bench/peers.py --shapes $SH --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad \
    --reps 10 --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python --stage-flags "$flags" \
    --out $R/peers_$tag.json > $R/peers_$tag.log 2>&1
  echo "peers [$flags] rc $? $((SECONDS-T0)) s"
  grep -E "stage10|eager" $R/peers_$tag.log | cut -c1-200
done
S10=/tmp/build/stages/stage10_plan_per_batch
for s in lm128k_s30 lm128k_s100 lm128k lm128k_s300; do
  for share in 0 0.5 0 0.5; do
    [ $((SECONDS-T0)) -gt 540 ] && continue
    timeout 30 $S10 --load /tmp/cce-lm-data/$s --backward --iters 20 --dense-head $share > $R/t.txt 2>&1
    echo "$s head $share: $(grep -E 'time  |kept tiles' $R/t.txt | tr '\n' ' ' | cut -c1-240)"
  done
done
echo "total $((SECONDS-T0)) s"
