#!/usr/bin/env bash
# Session 26, call 1 (wip/consumer-lag): build; the tile engine's tests with lag 0 and 3; the GPU mutant
# g_softcap_reciprocal_coarse; the A/B of CCE_EXP_CONSUMER_LAG 0 / 3 (/ 2) at gemma2, gemma2_flat, llama3 in
# cce_bench (stage 10 loss + grad and the floor in each process), the lags alternating.
set -o pipefail
T0=$SECONDS
R=$OUT/c1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse --short HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c1.tgz -C $OUT c1; exit 1; }
echo "build $((SECONDS-T0)) s"
for lag in 0 3; do
  (cd /tmp/build && CCE_EXP_CONSUMER_LAG=$lag timeout 120 ./tests/gpu/test_stages_gpu --gtest_filter='AllPaths/TileEngineGemm.*:TilePaths.*' > $R/tile_tests_lag$lag.log 2>&1)
  echo "tile tests lag $lag rc $? $(grep -E '^\[  PASSED|^\[  FAILED|SKIPPED \]' $R/tile_tests_lag$lag.log | tr '\n' ' ') $((SECONDS-T0)) s"
done
for round in 1 2; do for lag in 0 3 2; do
  [ $round = 2 ] && [ $lag = 2 ] && continue
  f=$R/ab_lag${lag}_r$round
  CCE_EXP_CONSUMER_LAG=$lag timeout 150 /tmp/build/bench/cce_bench --shapes=gemma2,gemma2_flat,llama3 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "r$round lag $lag: $(python3 -c "
import json;d=json.load(open('$f.json'))
m={}
for b in d['benchmarks']:
  if b.get('aggregate_name') in ('median','min','max'): m.setdefault(b['run_name'].split('/iter')[0],{})[b['aggregate_name']]=b['real_time']
for k,v in sorted(m.items()): print('%s %.3f (%.3f-%.3f)'%(k,v['median'],v['min'],v['max']),end='; ')
" 2>&1) ($((SECONDS-T0)) s)"
done; done
# The GPU mutant (tests/mutants.txt), in place on the warm build, reverted after.
m=g_softcap_reciprocal_coarse; f=common/device_math.cuh
cp $f /tmp/orig_mutant
python3 -c "import sys;p=sys.argv[1];s=open(p).read();o='return softcap - (2.0f * softcap) * fast_reciprocal(e2x + 1.0f);';assert s.count(o)==1;open(p,'w').write(s.replace(o,'return softcap - (2.0f * softcap) * (fast_reciprocal(e2x + 1.0f) * (1.0f + 0x1p-10f));'))" $f
timeout 200 ninja -C /tmp/build tests/gpu/test_stages_gpu > $R/${m}_build.log 2>&1 || echo "$m build failed"
(cd /tmp/build && timeout 60 ./tests/gpu/test_stages_gpu --gtest_filter='DeviceMath.*' > $R/$m.log 2>&1)
echo "$m rc $? (nonzero = caught) $(grep -E '^\[  FAILED' $R/$m.log | head -2 | tr '\n' ' ') $((SECONDS-T0)) s"
cp /tmp/orig_mutant $f
echo "total $((SECONDS-T0)) s"
tar czf $OUT/c1.tgz -C $OUT c1
