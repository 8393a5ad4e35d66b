#!/usr/bin/env bash
# Session 34, call 5 (on call 4's warm machine after two one-line calls that copied QuACK's part.01 and rest/ into
# /tmp/q; this one carries part.02: the tree and a part fill the 64 MiB a call carries): eager
# PyTorch, torch.compile, stage 10's op and QuACK in turns (peers.py --interleave, the order reversed every other
# round) at gemma2_flat and lm128k_s0, with call 4's floor JSON: the README's claim that the op beats QuACK's
# chunked plan there, on the code with the dense chunks' target rows.
set -o pipefail
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/part.00 /tmp/q/part.01 .quack-wheels/part.02 > /tmp/q/cu13.whl
  for w in /tmp/q/cu13.whl /tmp/q/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
fi
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
PYTHONUNBUFFERED=1 timeout 540 python3 bench/peers.py --interleave --reps 30 --shapes gemma2_flat,lm128k_s0 \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s34/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
echo "total $((SECONDS-T0)) s"
