#!/usr/bin/env bash
# Session 24, call 3: main's exact tree (e6b7d78, whose whole GPU suite passed in call 2). The floor and stage 10 at
# the five shapes (loss, loss + grad), lm32k's data made while cce_bench builds.
set -o pipefail
T0=$SECONDS
R=$OUT/c3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
cp .device-deps/s24/commit_main.txt $R/commit.txt
[ -f /tmp/cce-lm-data/lm32k/e.npy ] || (python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k --stats-dir /tmp/lm-stats > $R/lm_data.log 2>&1) &
LM=$!
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build cce_bench) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
wait $LM; echo "lm data $((SECONDS-T0)) s"
CCE_COMMIT=$(cat $R/commit.txt) timeout $((560 - (SECONDS - T0))) /tmp/build/bench/cce_bench --shapes=gpt2,llama3,gemma2,gemma2_flat,lm32k --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(cublas_floor|stage10_plan_per_batch)/' --benchmark_out=$R/bench_cpp.json --benchmark_out_format=json > $R/bench_cpp.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"
grep median $R/bench_cpp.txt | awk '{split($1,a,"/"); printf "%s %s %s %s\n", a[1], a[2], a[3], $2}'
(cd $OUT && tar -czf c3.tgz c3 && rm -r c3)
echo "total $((SECONDS-T0)) s"
