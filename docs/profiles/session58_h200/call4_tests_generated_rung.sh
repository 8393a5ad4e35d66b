#!/usr/bin/env bash
# Session 58, call 4 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this> on branch wip/s57-regroup with the three
# rewritten tests): the build; stage 10's and stage 11's GPU tests (PlanPerBatch, ShardedVocabulary); then the rung run
# at the generated shapes only (no training fits the budget): cce_bench (floor, stage 09, stage 10; loss + grad) at
# gpt2, llama3, gemma2, gemma2_flat, then bench/peers.py --interleave (eager, torch.compile, the op; 20 rounds).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/cce-inputs
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short | head; nvidia-smi -L; } > $R/status.txt 2>&1
build /tmp/build . > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 150 ctest -R "PlanPerBatch|ShardedVocabulary" -j4 --timeout 120 --output-on-failure) > $R/ctest_stage10.log 2>&1
echo "stage 10/11 tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_stage10.log)"
grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_stage10.log | head; grep -E '^seed|budget' $R/ctest_stage10.log | head
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"
S=gpt2,llama3,gemma2,gemma2_flat
timeout $((420 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=$S \
  --benchmark_filter='^(cublas_floor|stage09_deterministic_products|stage10_plan_per_batch)/loss_grad/' \
  --benchmark_out=/tmp/rung_bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/rung_bench.json $R/bench.json
PYTHONUNBUFFERED=1 timeout $((555 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes $S \
  --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op \
  --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/rung_bench.json --out $R/peers_generated.json > $R/peers_generated.txt 2>&1
echo "peers rc $? at $((SECONDS-T0)) s"; grep -E "loss_grad" $R/peers_generated.txt | head -20
cd $OUT && tar czf call4.tgz call4
