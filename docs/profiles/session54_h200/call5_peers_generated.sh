#!/usr/bin/env bash
# Session 54, call 5 (right after call 4 on the same warm machine, QuACK unpacked in /tmp; run as
# CCE_COMMIT=<HEAD> bash <this>): peers.py --interleave, 20 rounds, eager PyTorch, torch.compile, stage 10's op and
# QuACK in turns at gemma2, llama3, gpt2, gemma2_softcap and lm32k, with call 2's floor. QuACK is skipped with its
# reason where it cannot run (gpt2's V = 50257; no softcap argument).
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
peers() {  # name shapes: one peers.py process, its own JSON (a timeout in the second keeps the first)
  PYTHONUNBUFFERED=1 timeout $((470 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes $2 \
    --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
    --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s54/bench.json --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_$1.txt | cut -c1-200
}
peers gemma2_llama3 gemma2,llama3
peers others gpt2,gemma2_softcap,lm32k
cd $OUT && tar czf call5.tgz call5
