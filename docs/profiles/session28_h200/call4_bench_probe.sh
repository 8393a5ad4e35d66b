#!/usr/bin/env bash
# Session 28, call 4 (carrying QuACK's first wheel part): build main's tree; the generated shapes' inputs; cce_bench
# (the floor and stage 10, 50 single calls a case) at the generated shapes; docs/profiles/session28_h200/dense_gap_probe.py at
# lm128k's shape on flat random data and at gemma2_flat, nvidia-smi's clocks and power logged beside it.
set -o pipefail
T0=$SECONDS
R=$OUT/c4; mkdir -p $R /tmp/sweep /tmp/q
cp .quack-wheels/part.00 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git log -1 --format=%H > $R/commit.txt; git status --short > $R/status.txt
C=$(git rev-parse --short HEAD)
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random" "lm128k_flat 8192 2048 128000 random"; do
  set -- $s
  [ -f /tmp/cce-inputs/$1/targets.npy ] || timeout 200 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 &
done
wait; echo "inputs $((SECONDS-T0)) s"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > $R/smi.csv &
SMI=$!
CCE_COMMIT=$C timeout 300 /tmp/build/bench/cce_bench --shapes=gemma2_flat,gemma2,llama3,gpt2,gemma2_softcap \
  --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/' --benchmark_out=/tmp/sweep/bench_gen.json --benchmark_out_format=json > $R/bench_gen.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/sweep/bench_gen.json $R/
echo "probe start $(date +%T.%N)" > $R/marks.txt
timeout 200 python3 docs/profiles/session28_h200/dense_gap_probe.py /tmp/build/python $R/probe.json /tmp/cce-inputs/lm128k_flat /tmp/cce-inputs/gemma2_flat > $R/probe.log 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; echo "probe end $(date +%T.%N)" >> $R/marks.txt
kill $SMI
grep median $R/bench_gen.txt | awk '{print $1, $2}'
python3 - $R/probe.json <<'P'
import json,sys
d=json.load(open(sys.argv[1]))
for k,v in d["shapes"].items():
    print(k, {m: round(v[m]["gpu_ms_median"],3) for m in ("back_to_back","idle_10ms_between","c_call","ahead_alone","queued","back_to_back_again")}, round(v["queued_minus_ahead_ms"],3))
P
tar czf $OUT/c4.tgz -C $OUT c4 && rm -r $R
echo "total $((SECONDS-T0)) s"
