#!/usr/bin/env bash
# One device call: where lm128k_s0's 2.6 ms between the dense plan's GPU span (16.9 ms traced) and its event time
# (19.5 ms) goes. Builds stage 01, stage 10 and the C interface; saves flat inputs at lm128k's and gemma2's shapes;
# times the C interface alone and queued behind spinning GPU work (docs/profiles/session28_h200/dense_gap_probe.py); traces one call with
# the host's API calls (bench/stage_timeline.py --host); ncu of the forward that keeps q.
set -o pipefail
T0=$SECONDS
R=$OUT/gap; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git log -1 --format=%h > $R/head.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized stage10_plan_per_batch cce_capi) > $R/build.log 2>&1 || { tail -30 $R/build.log; exit 1; }
echo "build $((SECONDS-T0)) s"
for s in "lm128k_flat 8192 2048 128000" "gemma2_flat 8192 2304 256000"; do
  set -- $s
  [ -f /tmp/cce-inputs/$1/targets.npy ] || timeout 120 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data random --seed 1234 --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1
done
echo "inputs $((SECONDS-T0)) s"
timeout 200 python3 docs/profiles/session28_h200/dense_gap_probe.py /tmp/build/python $R/probe.json /tmp/cce-inputs/lm128k_flat /tmp/cce-inputs/gemma2_flat 2>&1 | tee $R/probe.log
echo "probe $((SECONDS-T0)) s"
timeout 120 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-inputs/lm128k_flat /tmp/cce-inputs/gemma2_flat --calls 5 --host --out $R/timeline_host.txt > $R/timeline_host.log 2>&1
echo "timeline rc $? ($((SECONDS-T0)) s)"; grep '^span\|^host span' $R/timeline_host.txt
timeout 120 ncu --set full --kernel-name-base demangled -k regex:FoldThenKeepTile -c 1 /tmp/build/stages/stage10_plan_per_batch --n 8192 --d 2048 --v 128000 --dtype bf16 --data random --seed 1234 --backward --plan dense --iters 1 > $R/ncu_keep.txt 2>&1
echo "ncu rc $? $(grep -m1 'Duration' $R/ncu_keep.txt) ($((SECONDS-T0)) s)"
cd $OUT && tar czf gap.tgz gap && rm -rf gap
echo "total $((SECONDS-T0)) s"
