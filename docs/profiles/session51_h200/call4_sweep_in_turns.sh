#!/usr/bin/env bash
# Session 51, call 4 (right after call 3, on the same warm machine: call 1's training and QuACK unpacked in /tmp):
# the lm128k sweep with every peer that runs there in one run: cce_bench's floor and stage 10 (loss + grad) at
# lm128k_s30, lm128k_s100, lm128k_s300 and lm128k, then peers.py --interleave, 20 rounds, eager PyTorch,
# torch.compile, stage 10's op and QuACK in turns there, with that floor.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
S=lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout 120 /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=$R/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
PYTHONUNBUFFERED=1 timeout 430 python3 bench/peers.py --interleave --reps 20 --shapes $S \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data \
  --modes loss_grad --cce-python /tmp/build/python --floor-json $R/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
cd $OUT && tar czf call4.tgz call4
