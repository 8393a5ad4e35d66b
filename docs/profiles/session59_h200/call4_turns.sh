#!/usr/bin/env bash
# Session 59, call 4 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): why the op takes 5-9% more than
# cce_bench's stage 10 at gemma2 in peers.py's turns (sessions 54-59) when op_overhead_probe.py finds about 1%. One
# machine, one build: cce_bench (the floor and stage 10 at gemma2); peers.py --interleave at gemma2 with the op alone,
# then in turns with torch.compile, then with eager, 20 rounds each; then op_overhead_probe.py (the op's synchronized
# and queued overhead at gemma2's and lm32k's shapes) on this code.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
build /tmp/build . cce_capi cce_bench stage01_materialized > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
/tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1 || echo "save gemma2 failed"
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1 || echo "save lm32k failed"
timeout 90 /tmp/build/bench/cce_bench --shapes=gemma2 --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/loss_grad/' \
  --benchmark_out=$R/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s: $(grep -E 'stage10.*_median' $R/bench.txt | grep -oE 'manual_time_median +[0-9.]+')"
turns() {  # name impls
  PYTHONUNBUFFERED=1 timeout $((330 - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 20 --shapes gemma2 \
    --impls $2 --modes loss_grad --cce-python /tmp/build/python --floor-json $R/bench.json \
    --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s: $(grep -E '^stage10_plan_per_batch_op' $R/peers_$1.txt | grep -oE '[0-9.]+ ms' | head -1)"
}
turns op_alone stage10_plan_per_batch_op
turns with_compile peer_torch_compile,stage10_plan_per_batch_op
turns with_eager peer_torch_eager,stage10_plan_per_batch_op
timeout $((440 - (SECONDS-T0))) python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; tail -12 $R/probe.txt
cd $OUT && tar czf call4.tgz call4 && rm -rf call4
