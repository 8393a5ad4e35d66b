#!/usr/bin/env bash
# Session 55, call 3: the rung table's peers on one H200, right after call2_op_rung_bench.sh on
# the same warm machine (its training, inputs and build in /tmp; run as CCE_COMMIT=<HEAD> bash <this>): eager PyTorch,
# torch.compile and stage 10's op in turns (peers.py --interleave, 20 rounds) at the table's ten shapes, with call A's
# floor (/tmp/rung_bench.json). Then bench/ladder_table.py --wide <call 2's bench.json> <these peers JSON> gives the rows.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
peers() {  # name shapes: one peers.py process, its own JSON (a timeout in the second keeps the first)
  PYTHONUNBUFFERED=1 timeout $((585 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes $2 \
    --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op --lm-data /tmp/cce-lm-data \
    --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/rung_bench.json --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_$1.txt | cut -c1-200
}
peers trained lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
peers generated gpt2,llama3,gemma2,gemma2_flat
cd $OUT && tar czf call3.tgz call3
