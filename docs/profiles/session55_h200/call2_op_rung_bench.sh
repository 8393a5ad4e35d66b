#!/usr/bin/env bash
# Session 55, call 2 (right after call 1 on the same warm machine: its build and training in /tmp; run as
# CCE_COMMIT=<HEAD> bash <this>): the PyTorch op's tests; the generated shapes' inputs; one cce_bench run of the
# floor, stage 09 and stage 10 (loss + grad) at the rung table's ten shapes (stage 10's README); then the half-tile
# probe (half_tiles_probe.py) on the same inputs, untimed.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/cce-inputs
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cd /tmp/build && timeout 200 ctest -L pytorch -R pytorch.op -j2 --timeout 180) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"; ls /tmp/cce-lm-data
S=gpt2,llama3,gemma2,gemma2_flat,lm32k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300,lm128k
timeout $((470 - (SECONDS-T0))) /tmp/build/bench/cce_bench --shapes=$S --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage09_deterministic_products|stage10_plan_per_batch)/loss_grad/' \
  --benchmark_out=/tmp/rung_bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/rung_bench.json $R/bench.json
grep -E "_median" $R/bench.txt | awk '{print $1, $2}' | sed 's#/iterations:1/repeats:[0-9]*/manual_time_median##'
P=docs/profiles/session55_h200/half_tiles_probe.py
probe() { timeout $((580 - (SECONDS-T0))) python3 $P "$@" >> $R/probe.txt 2>&1 || echo "probe $2 failed"; }
probe /tmp/cce-lm-data/lm128k --label lm128k --log2-eps -12 -12.5 -13 -13.5 -14 --out $R/probe_lm128k.json
probe /tmp/cce-lm-data/lm128k_s300 --label lm128k_s300 --log2-eps -12.5 -13 --out $R/probe_lm128k_s300.json
probe /tmp/cce-lm-data/lm128k_s100 --label lm128k_s100 --log2-eps -15 --out $R/probe_lm128k_s100.json
probe /tmp/cce-lm-data/lm32k --label lm32k --log2-eps -9 --out $R/probe_lm32k.json
probe /tmp/cce-inputs/gemma2 --label gemma2 --log2-eps -8 --out $R/probe_gemma2.json
probe /tmp/cce-inputs/llama3 --label llama3 --log2-eps -8 --out $R/probe_llama3.json
probe /tmp/cce-inputs/gpt2 --label gpt2 --log2-eps -8 --out $R/probe_gpt2.json
cat $R/probe.txt | grep -v Warning; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
