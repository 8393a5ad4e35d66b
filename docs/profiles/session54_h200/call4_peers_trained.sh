#!/usr/bin/env bash
# Session 54, call 4 (right after call 3 on the same warm machine; carry [".quack-wheels/xz4.03"]; run as
# CCE_COMMIT=<HEAD> bash <this>): QuACK and its packages unpacked from the four parts, then peers.py --interleave,
# 20 rounds, the order reversed every other round: eager PyTorch, torch.compile, stage 10's op and QuACK in turns at
# gemma2_flat and lm128k's five snapshots, with call 2's floor (x floor from the same machine's run).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
if [ ! -d /tmp/qsite/quack ]; then
  mkdir -p /tmp/qsite && cat /tmp/q/xz4.00 /tmp/q/xz4.01 /tmp/q/xz4.02 .quack-wheels/xz4.03 > /tmp/q/site.tar.xz || exit 1
  python3 -m tarfile -e /tmp/q/site.tar.xz /tmp/qsite || exit 1
fi
echo "unpacked at $((SECONDS-T0)) s"
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
peers() {  # name shapes: one peers.py process, its own JSON (a timeout in the second keeps the first)
  PYTHONUNBUFFERED=1 timeout $((575 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes $2 \
    --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
    --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s54/bench.json --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_$1.txt | cut -c1-200
}
peers dense gemma2_flat,lm128k_s0
peers sweep lm128k_s30,lm128k_s100,lm128k_s300,lm128k
cd $OUT && tar czf call4.tgz call4
