#!/usr/bin/env bash
# Session 31, call 5 (the session's last 480 s of device time): where lm32k's 1.6 ms go on today's code (the last
# timeline there was an H100's, 2e13cf1). Build while bench/lm_data.py trains lm32k's model; then one traced call of
# stage 10's C interface with the host's API calls and the GPU's waits (bench/stage_timeline.py --host), and the
# executable's median.
set -o pipefail
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(timeout 250 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k --stats-dir $R/lm_stats > $R/lm_data.log 2>&1; echo "lm rc $? $((SECONDS-T0)) s" > $R/lm.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 300 ]; do sleep 2; done; cat $R/lm.rc
timeout 60 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm32k --calls 5 --host --out $R/timeline_lm32k_host.txt > $R/timeline.log 2>&1
echo "timeline rc $? ($((SECONDS-T0)) s)"; grep "^span" $R/timeline_lm32k_host.txt
for round in 1 2; do
  timeout 30 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/lm32k --backward --iters 50 > $R/t.txt 2>&1
  echo "round $round: $(grep -E 'time  |kept tiles' $R/t.txt | tr '\n' ' ' | cut -c1-260)"
done
rm -rf $R/lm_stats
echo "total $((SECONDS-T0)) s"
