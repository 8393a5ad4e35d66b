#!/usr/bin/env bash
# Session 51, call 5 (right after call 4, on the same warm machine, QuACK unpacked in /tmp): gemma2's and llama3's
# generated inputs saved, cce_bench's floor and stage 10 (loss + grad) there, then peers.py --interleave, 20 rounds,
# eager PyTorch, torch.compile, stage 10's op and QuACK in turns, with that floor.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_inputs.log 2>&1
$S1 --n 8192 --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/llama3 --save-large --iters 0 >> $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
S=gemma2,llama3
timeout 120 /tmp/build/bench/cce_bench --shapes=$S \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=$R/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-160
export PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
PYTHONUNBUFFERED=1 timeout 400 python3 bench/peers.py --interleave --reps 20 --shapes $S \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_quack \
  --modes loss_grad --cce-python /tmp/build/python --floor-json $R/bench.json --out $R/peers.json > $R/peers.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers.txt | cut -c1-200
cd $OUT && tar czf call5.tgz call5
