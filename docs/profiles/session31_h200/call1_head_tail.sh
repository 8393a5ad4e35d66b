#!/usr/bin/env bash
# Session 31, call 1 (session 30's next_head_tail.sh, with gemma2 added): build; lm128k's data (800 steps) in the
# background; the dense head's three GPU mutants (each must fail PlanPerBatch.DenseHead*); then one traced call of
# stage 10's C interface at lm128k, lm128k_s30 and gemma2 (realistic generator), with and without --dense-head 0.5
# (bench/stage_timeline.py): where the sparse plan's backward spends its time.
set -o pipefail
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 400 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
timeout 250 python3 scripts/mutants.py --gpu --only g10_head_pairs_not_kept --only g10_head_de_overwritten \
  --only g10_head_dc_rows_unsorted --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -8 $R/mutants.txt
timeout 60 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1; echo "gemma2 inputs rc $?"
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 450 ]; do sleep 2; done; cat $R/lm.rc
for flags in "" "--dense-head 0.5"; do
  timeout 60 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm128k /tmp/cce-lm-data/lm128k_s30 \
    /tmp/cce-inputs/gemma2 --flags "$flags" --out "$R/timeline${flags// /_}.txt" > $R/timeline${flags// /_}.log 2>&1
  echo "timeline [$flags] rc $? ($((SECONDS-T0)) s)"
done
echo "total $((SECONDS-T0)) s"
