#!/usr/bin/env bash
# Session 53, call 1 (one H200): the whole GPU suite on the tree submitted in session 52 (8cd33bf: its last CUDA
# change 6cabbde was checked cubin-identical only, and 263ca75 changed a GPU test that never ran on a device), then
# the PyTorch op's tests (test_op.py changed in session 52), while lm128k's model trains once beside them; last the
# stage executable's candidates line at lm128k and lm128k_s300 for call 2's half-step measurement.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 360 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_gpu.log | head -20
(cd /tmp/build && timeout $((540 - (SECONDS-T0))) ctest -L pytorch -R pytorch.op -j2 --timeout 200) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 560 ]; do sleep 2; done; cat $R/lm_data.rc
for s in lm128k lm128k_s300; do
  timeout 15 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 10 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'drop   |candidates|time  ' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-500)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
