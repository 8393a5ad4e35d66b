#!/usr/bin/env bash
# Session 36, call 1 (a fresh machine; carries the first third of a tar of QuACK's wheels, .quack-wheels/s36/q.00): branch wip/s36 = main +
# wip/last-wait-before-de (one dense chunk queues dC's product and its target rows, the call's last wait, before dE's
# product) + wip/plan-line-in-stage-10 (stage 09 without stage 10's hook). Build; stage 10's tests; memcheck of a dense
# chunk with dC; the inputs of gemma2_flat and lm128k's trained data; bench/stage_timeline.py through the op with the
# host's calls at gemma2_flat and lm128k_s0 (is the idle GPU at the end of the op's call gone?); cce_bench at
# gemma2_flat and lm128k_s0 (the floor JSON for the peers in turns); the executable's plan line at three shapes.
set -o pipefail
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/q /tmp/s36
cp .quack-wheels/s36/q.00 /tmp/q/ 2>/dev/null
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cd /tmp/build && timeout 200 ctest -R "^PlanPerBatch\.|^stage10_plan_per_batch|^DropPlan|^DropBeforeRecompute\.|^DeterministicProducts\.|^stage09|^stage11" -j4 --timeout 120 > $R/ctest_stage10.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_stage10.log | head
timeout 120 compute-sanitizer --tool memcheck /tmp/build/stages/stage10_plan_per_batch --n 300 --d 136 --v 20011 \
  --data random --plan dense --backward --check --iters 0 > $R/memcheck.txt 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY|check  ' $R/memcheck.txt | tr '\n' ' ' | cut -c1-200)"
mkdir -p /tmp/cce-inputs
timeout 120 /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 \
  --save /tmp/cce-inputs/gemma2_flat --save-large --iters 0 > $R/save_inputs.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done
cat $R/lm_data.rc 2>/dev/null
for d in /tmp/cce-inputs/gemma2_flat /tmp/cce-lm-data/lm128k_s0; do
  s=$(basename $d)
  timeout 60 python3 bench/stage_timeline.py /tmp/build/python $d --through op --host --out $R/timeline_op_$s.txt > $R/timeline_op_$s.log 2>&1
  echo "$s op: $(grep -E '^span' $R/timeline_op_$s.txt | head -1)"
done
CCE_COMMIT=$(git rev-parse --short HEAD) timeout 120 /tmp/build/bench/cce_bench --shapes=gemma2_flat,lm128k_s0 --lm-data=/tmp/cce-lm-data \
  --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
  --benchmark_out=/tmp/s36/bench.json --benchmark_out_format=json > $R/bench.txt 2>&1
echo "cce_bench rc $? at $((SECONDS-T0)) s"; cp /tmp/s36/bench.json $R/
grep -E "_median" $R/bench.txt | tr -s ' ' | cut -c1-200
for s in lm128k lm128k_s0 gemma2_flat; do
  d=/tmp/cce-lm-data/$s; [ $s = gemma2_flat ] && d=/tmp/cce-inputs/$s
  timeout 40 /tmp/build/stages/stage10_plan_per_batch --load $d --backward --iters 3 > $R/plan_$s.txt 2>&1
  echo "$s: $(grep -m1 -E '^ *plan|plan:' $R/plan_$s.txt | cut -c1-220)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
