#!/usr/bin/env bash
# Session 51, call 2 (right after call 1, on the same warm machine; carry [".quack-wheels/xz.01"], QuACK's second
# part): peers.py --interleave at lm128k_s30 and lm128k_s100 (call 1's training), eager PyTorch, torch.compile and
# stage 10's op in turns, 20 rounds: the dE and dC errors of eager and of the op on the same inputs in one run (issue
# 25: lm128k_s30's dC error against eager's), with the floor of call 1's machine where it has the shape.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
cp .quack-wheels/xz.01 /tmp/q/ && echo "carried $(du -h /tmp/q/xz.01 | cut -f1)"
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
PYTHONUNBUFFERED=1 timeout 300 python3 bench/peers.py --interleave --reps 20 --shapes lm128k_s30,lm128k_s100 \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --out $R/peers_s30_s100.json > $R/peers_s30_s100.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_s30_s100.txt | cut -c1-200
cd $OUT && tar czf call2.tgz call2
