#!/usr/bin/env bash
# Prepared in session 30 for the next device session, not run yet. One call on a fresh machine: build; lm128k's data
# (800 steps) in the background; the dense head's three GPU mutants (scripts/mutants.py --gpu: each must fail
# PlanPerBatch.DenseHead*); then one traced call of stage 10's C interface at lm128k and lm128k_s30 with and without
# --dense-head 0.5 (bench/stage_timeline.py): which kernels the head takes time from, and where the sparse tail's
# time goes (the head saved 0.2 ms at lm128k where the per-pair model said 1.5).
set -o pipefail
T0=$SECONDS
R=$OUT/next; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/next.tgz -C $OUT next; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 400 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1; echo "lm rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
timeout 240 python3 scripts/mutants.py --gpu --only g10_head_pairs_not_kept --only g10_head_de_overwritten \
  --only g10_head_dc_rows_unsorted --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -8 $R/mutants.txt
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 470 ]; do sleep 2; done; cat $R/lm.rc
for flags in "" "--dense-head 0.5"; do
  timeout 50 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm128k /tmp/cce-lm-data/lm128k_s30 \
    --flags "$flags" --out "$R/timeline${flags// /_}.txt" > /dev/null 2>&1; echo "timeline [$flags] rc $?"
done
tar czf $OUT/next.tgz -C $OUT next && rm -r $R
echo "total $((SECONDS-T0)) s"
