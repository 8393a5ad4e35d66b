#!/usr/bin/env bash
# Session 35, call 4 (warm, after call 3 unpacked QuACK's wheels into /tmp/qsite): eager PyTorch, torch.compile,
# stage 10's op and QuACK in turns (peers.py --interleave, the order reversed every other round) at gemma2_flat and
# lm128k_s0, with call 1's floor JSON: does the op with the selective target rows beat QuACK's chunked plan there?
set -o pipefail
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
PYTHONUNBUFFERED=1 timeout 540 python3 bench/peers.py --interleave --reps 30 --shapes gemma2_flat,lm128k_s0 \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s35/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
