#!/usr/bin/env bash
# Session 27, call 2 (carrying QuACK's second wheel half): the generated shapes' input files for the peers (stage 01
# --save, in parallel), then cce_bench: the floor and stage 10, loss and loss + grad, 50 single calls a case after 3
# untimed, in two processes: the generated shapes and lm32k, then lm128k and its four snapshots.
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R /tmp/sweep
cp .quack-wheels/part.01 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
C=$(git rev-parse --short HEAD)
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  [ -f /tmp/cce-inputs/$1/targets.npy ] || timeout 200 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 &
done
wait; ls /tmp/cce-inputs; echo "inputs $((SECONDS-T0)) s"
run_bench() {  # name shapes
  CCE_COMMIT=$C timeout $((575 - (SECONDS - T0))) /tmp/build/bench/cce_bench --shapes=$2 --lm-data=/tmp/cce-lm-data \
    --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/' --benchmark_out=/tmp/sweep/$1.json --benchmark_out_format=json > $R/$1.txt 2>&1
  echo "$1 rc $? at $((SECONDS-T0)) s"; cp /tmp/sweep/$1.json $R/ 2>/dev/null
}
run_bench bench_gen gemma2_flat,gemma2,llama3,gpt2,gemma2_softcap,lm32k
[ $((SECONDS-T0)) -lt 330 ] && run_bench bench_lm128k lm128k,lm128k_s0,lm128k_s30,lm128k_s100,lm128k_s300
grep median $R/*.txt | awk '{split($1,a,"/"); printf "%s %s %s %s\n", a[1], a[2], a[3], $2}'
tar czf $OUT/c2.tgz -C $OUT c2 && rm -r $R
echo "total $((SECONDS-T0)) s"
