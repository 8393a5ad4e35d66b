#!/usr/bin/env bash
# Session 36, call 3 (warm; carries the last third of QuACK's wheels' tar, .quack-wheels/s36/q.02, and unpacks the
# wheels into /tmp/qsite): eager PyTorch, torch.compile, stage 10's op and QuACK in turns (peers.py --interleave, the
# order reversed every other round) at gemma2_flat and lm128k_s0, with call 1's floor JSON.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/q.00 /tmp/q/q.01 .quack-wheels/s36/q.02 > /tmp/q/q.tar && mkdir -p /tmp/q/w && tar xf /tmp/q/q.tar -C /tmp/q/w
  for w in /tmp/q/w/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
fi
ls /tmp/qsite | head -3
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
PYTHONUNBUFFERED=1 timeout 500 python3 bench/peers.py --interleave --reps 30 --shapes gemma2_flat,lm128k_s0 \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s36/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
