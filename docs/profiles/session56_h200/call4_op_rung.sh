#!/usr/bin/env bash
# Session 56, call 4 (right after call 3 on the same warm machine: its build and training in /tmp; run as
# CCE_COMMIT=<HEAD> bash <this>): the PyTorch op's tests; the generated shapes' inputs; the rung table's run: cce_bench
# (floor, stage 09, stage 10; loss + grad) at the ten shapes of stage 10's README, then bench/peers.py --interleave
# (eager, torch.compile, the op in turns, 20 rounds) on the same machine and training.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/cce-inputs
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cd /tmp/build && timeout 150 ctest -L pytorch -R pytorch.op -j2 --timeout 140) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"
S=gpt2,llama3,gemma2,gemma2_flat,lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout $((400 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage09_deterministic_products|stage10_plan_per_batch)/loss_grad/' \
  --benchmark_out=/tmp/rung_bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/rung_bench.json $R/bench.json
grep -E "stage10.*_median" $R/bench.txt | grep -oE "loss_grad/[a-z0-9_]+|manual_time_median +[0-9.]+|drop_eps_log2=[-0-9.]+|kept_frac=[0-9.]+|misplaced_mass=[0-9.]+|dE_rel_err=[0-9.a-z]+" | paste -sd' ' | sed 's/loss_grad/\nloss_grad/g'
peers() {  # name shapes: one peers.py process, its own JSON (a timeout in the second keeps the first)
  PYTHONUNBUFFERED=1 timeout $((585 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes $2 \
    --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op --lm-data /tmp/cce-lm-data \
    --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/rung_bench.json --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s"
}
peers trained lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
peers generated gpt2,llama3,gemma2,gemma2_flat
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
