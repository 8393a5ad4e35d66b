#!/usr/bin/env bash
# Session 29, call 2 (carrying QuACK's second wheel part): the input files for the peers and the op's probe (stage 01
# --save); cce_bench, the floor and stage 10, loss + grad, 50 single calls a case after 3 untimed, at the shapes
# where the dense plan or the snapshots run; then python/op_overhead_probe.py (the C call and the op in turns, one
# process) at gemma2 and lm32k's shape.
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R /tmp/s29
cp .quack-wheels/part.01 /tmp/q/
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
C=$(git rev-parse --short HEAD)
save() {  # folder n d v data
  [ -f $1/targets.npy ] || timeout 200 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 --save $1 --save-large --iters 0 > $R/save_$(basename $1).log 2>&1
}
save /tmp/cce-inputs/gemma2 8192 2304 256000 realistic &
save /tmp/cce-inputs/gemma2_flat 8192 2304 256000 random &
save /tmp/lm-gen/lm32k 8192 768 32000 realistic &
wait; ls /tmp/cce-inputs /tmp/lm-gen; echo "inputs $((SECONDS-T0)) s"
CCE_COMMIT=$C timeout 330 /tmp/build/bench/cce_bench --shapes=lm128k_s0,gemma2_flat,lm128k_s30,lm128k_s100 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/loss_grad/' --benchmark_out=/tmp/s29/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s29/bench.json $R/ 2>/dev/null
grep median $R/bench.txt | awk '{print $1, $2}'
timeout $((575 - (SECONDS - T0))) python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; tail -30 $R/probe.txt
tar czf $OUT/c2.tgz -C $OUT c2 && rm -r $R
echo "total $((SECONDS-T0)) s"
