#!/usr/bin/env bash
# For a next session, part B (right after next_peers_a.sh, on the same warm machine; carry [".quack-wheels/cu13.01",
# ".quack-wheels/rest"]): QuACK's wheels unpacked, then peers.py --interleave, 30 rounds, the order reversed every
# other round: eager PyTorch, torch.compile, stage 10's op and QuACK in turns at gemma2_flat and lm128k_s0, with part
# A's floor (× floor in the same machine's run).
T0=$SECONDS
R=$OUT/peers_b; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/cu13.00 .quack-wheels/cu13.01 > /tmp/q/cu13.whl || exit 1
  for w in /tmp/q/cu13.whl .quack-wheels/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
fi
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
PYTHONUNBUFFERED=1 timeout 520 python3 bench/peers.py --interleave --reps 30 --shapes gemma2_flat,lm128k_s0 \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s51/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
cd $OUT && tar czf peers_b.tgz peers_b
