#!/usr/bin/env bash
# Session 26, call 2 (main + the tile test case): build; lm32k's trained data (bench/lm_data.py); the op's tests;
# stage_timeline --host through the C interface and through the op at lm32k; three rounds of the issue's comparison
# (a cce_bench process, then a peers.py process with the op) at lm32k.
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c2.tgz -C $OUT c2; exit 1; }
echo "build $((SECONDS-T0)) s"
timeout 300 python3 bench/lm_data.py --only lm32k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1 &
LM=$!
(cd /tmp/build && timeout 200 ctest -L pytorch -j2 > $R/ctest_pytorch.log 2>&1); echo "pytorch tests rc $? $(grep -E 'tests passed|tests failed' $R/ctest_pytorch.log) $((SECONDS-T0)) s"
wait $LM; echo "lm_data rc $? $((SECONDS-T0)) s"
L=/tmp/cce-lm-data/lm32k
for through in capi op; do
  timeout 120 python3 bench/stage_timeline.py /tmp/build/python $L --calls 6 --host --through $through --out $R/timeline_$through.txt > $R/timeline_$through.log 2>&1
  echo "timeline $through rc $? $(grep -m1 '^span' $R/timeline_$through.txt) $((SECONDS-T0)) s"
done
for round in 1 2 3; do
  f=$R/bench_r$round
  timeout 60 /tmp/build/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  g=$R/op_r$round
  timeout 90 python3 bench/peers.py --shapes lm32k --lm-data /tmp/cce-lm-data --impls stage10_plan_per_batch_op --modes loss_grad --reps 30 --cce-python /tmp/build/python --out $g.json > $g.txt 2>&1
  echo "round $round: $(python3 -c "
import json
b=[x for x in json.load(open('$f.json'))['benchmarks'] if x.get('aggregate_name')=='median' and x['run_name'].startswith('stage10')][0]['real_time']
o=[x for x in json.load(open('$g.json'))['benchmarks'] if x.get('aggregate_name')=='median'][0]['real_time']
print('executable %.4f op %.4f overhead %+.2f%%'%(b,o,100*(o/b-1)))" 2>&1) $((SECONDS-T0)) s"
done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/c2.tgz -C $OUT c2
