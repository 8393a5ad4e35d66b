#!/usr/bin/env bash
# Session 24, call 1 (branch wip/s24 = main + wip/keep-lean): build it and main's tree (main.tar, no docs) side by
# side; the whole GPU suite on wip/s24; then gemma2_flat's loss + grad, main and lean alternating, three rounds.
set -o pipefail
T0=$SECONDS
R=$OUT/c1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
cp .device-deps/s24/commit.txt .device-deps/s24/main_commit.txt $R/
(rm -rf /tmp/main-src && mkdir -p /tmp/main-src && tar -xf .device-deps/s24/main.tar -C /tmp/main-src && cmake -S /tmp/main-src -B /tmp/build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 380 ctest -L "gpu|stage" -j4 --timeout 240 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
echo "suite $((SECONDS-T0)) s"
wait $BM; echo "main build rc $? $((SECONDS-T0)) s"
for round in 1 2 3; do for tree in main lean; do
  [ $((SECONDS-T0)) -gt 560 ] && break 2
  B=/tmp/build; C=$(cat $R/commit.txt); [ $tree = main ] && B=/tmp/build-main && C=$(cat $R/main_commit.txt)
  f=$R/ab_gemma2_flat_${tree}_r$round
  CCE_COMMIT=$C timeout 40 $B/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "$round $tree: $(python3 -c "import json;d=json.load(open('$f.json'));print(' '.join('%s %.3f'%(b['name'].split('/')[0][:6]+'_'+b['aggregate_name'],b['real_time']) for b in d['benchmarks'] if b.get('aggregate_name') in ('median','min','max')))" 2>/dev/null) ($((SECONDS-T0)) s)"
done; done
# The new GPU mutant (tests/mutants.txt), in place on the warm build, reverted after.
m=g10_half_last_tile_whole; f=stages/10_plan_per_batch/dense_backward.cu
if [ $((SECONDS-T0)) -lt 540 ]; then
  cp $f /tmp/orig_mutant
  python3 -c "import sys;p=sys.argv[1];s=open(p).read();o='if (keep.references != nullptr && col0 + Frag::kBN <= fold.p.v)';assert s.count(o)==1;open(p,'w').write(s.replace(o,'if (keep.references != nullptr)'))" $f
  ninja -C /tmp/build tests/gpu/test_stages_gpu > $R/${m}_build.log 2>&1 || echo "$m build failed"
  (cd /tmp/build && timeout 50 ./tests/gpu/test_stages_gpu --gtest_fail_fast --gtest_filter='PlanPerBatch.*' > $R/$m.log 2>&1)
  echo "$m rc $? (nonzero = caught) $(grep -E '^\[  FAILED' $R/$m.log | head -2 | tr '\n' ' ') $((SECONDS-T0)) s"
  cp /tmp/orig_mutant $f
fi
(cd $OUT && tar -czf c1.tgz c1 && rm -r c1)
echo "total $((SECONDS-T0)) s"
