#!/usr/bin/env bash
# Session 30, call 2 (carrying QuACK's second wheel part): how dense the sorted vocabulary's leading tiles are.
# The generated gemma2 and llama3 inputs saved (stage 01 --save); stage 10's sparse plan at every shape, its report
# line (eps, kept share) to set beside bench/dense_head_probe.py's rebuilt orders; the probe; then cce_bench's floor
# and stage 10 at lm128k_s0 (the floor JSON for call 3's peers).
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R /tmp/s30
cp .quack-wheels/part.01 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
save() {  # folder n d v data
  [ -f $1/targets.npy ] || timeout 200 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 --save $1 --save-large --iters 0 > $R/save_$(basename $1).log 2>&1
}
save /tmp/cce-inputs/gemma2 8192 2304 256000 realistic &
save /tmp/cce-inputs/llama3 8192 4096 128256 realistic &
wait; echo "inputs $((SECONDS-T0)) s"
DIRS="/tmp/cce-lm-data/lm128k /tmp/cce-lm-data/lm128k_s30 /tmp/cce-lm-data/lm128k_s100 /tmp/cce-lm-data/lm128k_s300 /tmp/cce-inputs/gemma2 /tmp/cce-inputs/llama3"
for dir in $DIRS; do
  timeout 60 /tmp/build/stages/stage10_plan_per_batch --load $dir --backward --plan sparse --iters 3 > $R/sparse_$(basename $dir).txt 2>&1
  echo "$(basename $dir) rc $?: $(tail -4 $R/sparse_$(basename $dir).txt | tr '\n' ' ' | cut -c1-400)"
done
echo "sparse reports $((SECONDS-T0)) s"
timeout $((420 - (SECONDS - T0))) python3 bench/dense_head_probe.py $DIRS --out $R/dense_head_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; cat $R/probe.txt | cut -c1-260
CCE_COMMIT=$(git rev-parse --short HEAD) timeout $((560 - (SECONDS - T0))) /tmp/build/bench/cce_bench --shapes=lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/loss_grad/' --benchmark_out=/tmp/s30/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s30/bench.json $R/ 2>/dev/null
grep median $R/bench.txt | awk '{print $1, $2}'
tar czf $OUT/c2.tgz -C $OUT c2 && rm -r $R
echo "total $((SECONDS-T0)) s"
