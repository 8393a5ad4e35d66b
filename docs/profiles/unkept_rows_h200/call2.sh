#!/usr/bin/env bash
# Session 25, call 2 (wip/s25, fresh or warm H200): build; the GPU mutant g10_half_last_tile_whole; then the A/B of
# dc_unkept_rows (wip/s25's thread per 16-byte piece against main's 256 threads): the kernel under ncu, and stage 10's
# loss + grad at gemma2 in cce_bench, the trees alternating. carry: [".device-deps/s25"]
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
# main's tree: the same sources but main's kept_products.cu
rm -rf /tmp/srcmain && mkdir -p /tmp/srcmain && cp -r . /tmp/srcmain/ && cp .device-deps/s25/main_kept_products.cu /tmp/srcmain/stages/09_deterministic_products/kept_products.cu
(cmake -S /tmp/srcmain -B /tmp/build_main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build_main bench/cce_bench stages/stage10_plan_per_batch) > $R/build_main.log 2>&1 &
BM=$!
# The GPU mutant (tests/mutants.txt), in place on the warm build, reverted after.
m=g10_half_last_tile_whole; f=stages/10_plan_per_batch/dense_backward.cu
cp $f /tmp/orig_mutant
python3 -c "import sys;p=sys.argv[1];s=open(p).read();o='const bool whole = col0 + Frag::kBN <= fold.p.v;';assert s.count(o)==1;open(p,'w').write(s.replace(o,'const bool whole = true;'))" $f
ninja -C /tmp/build tests/gpu/test_stages_gpu > $R/${m}_build.log 2>&1 || echo "$m build failed"
(cd /tmp/build && timeout 60 ./tests/gpu/test_stages_gpu --gtest_fail_fast --gtest_filter='PlanPerBatch.*' > $R/$m.log 2>&1)
echo "$m rc $? (nonzero = caught) $(grep -E '^\[  FAILED' $R/$m.log | head -2 | tr '\n' ' ') $((SECONDS-T0)) s"
cp /tmp/orig_mutant $f
wait $BM || { tail -20 $R/build_main.log; exit 1; }
echo "build main $((SECONDS-T0)) s"
ARGS="--n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --backward --iters 3"
for round in 1 2; do for tree in s25 main; do
  B=/tmp/build; [ $tree = main ] && B=/tmp/build_main
  timeout 90 ncu --clock-control none -k regex:dc_unkept_rows -c 4 --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    $B/stages/stage10_plan_per_batch $ARGS > $R/ncu_${tree}_r$round.txt 2>&1
  echo "$round $tree ncu: $(grep -E 'gpu__time_duration.sum|dram__throughput' $R/ncu_${tree}_r$round.txt | awk '{print $NF}' | tr '\n' ' ') ($((SECONDS-T0)) s)"
done; done
for round in 1 2 3; do for tree in s25 main; do
  B=/tmp/build; [ $tree = main ] && B=/tmp/build_main
  f=$R/ab_gemma2_${tree}_r$round
  timeout 60 $B/bench/cce_bench --shapes=gemma2 --benchmark_filter='^stage10_plan_per_batch/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "$round $tree: $(python3 -c "import json;d=json.load(open('$f.json'));print(' '.join('%s %.3f'%(b['aggregate_name'],b['real_time']) for b in d['benchmarks'] if b.get('aggregate_name') in ('median','min','max')))" 2>/dev/null) ($((SECONDS-T0)) s)"
done; done
echo "total $((SECONDS-T0)) s"
