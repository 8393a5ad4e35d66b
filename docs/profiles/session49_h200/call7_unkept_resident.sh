#!/usr/bin/env bash
# Session 49, call 7 (one H200): dc_unkept_rows' persistent grid sized to the blocks that fit on an SM at once
# (unkept_grid_resident.patch; main launched 8 an SM, and at gemma2's 288 threads only 7 fit: the 8th of each SM ran
# as a second round alone). "new" is the tree with the patch, "main" a copy with it reversed. ncu's duration and
# DRAM throughput of the kernel at gemma2 and llama3 on both; stages 09 and 10's GPU tests on new; cce_bench (floor,
# stage 10, loss + grad) at gemma2 on both in turns.
T0=$SECONDS
R=$OUT/call7; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session49_h200/unkept_grid_resident.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench stage10_plan_per_batch) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call7.tgz call7; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: main $(tail -1 $R/build_main.log | cut -c1-60)"
for shape in "gemma2 2304 256000" "llama3 4096 128256"; do
  set -- $shape
  for tree in main new; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size \
      -k regex:dc_unkept_rows $B/stages/stage10_plan_per_batch --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_$1_$tree.txt 2>&1
    echo "$1 $tree rc $?: $(grep -E 'gpu__time_duration|dram__throughput|launch__grid_size' $R/ncu_$1_$tree.txt | awk '{print $1, $NF}' | tr '\n' ' ')"
  done
done
echo "ncu done $((SECONDS-T0)) s"; tar czf $OUT/call7.tgz -C $OUT call7
(cd /tmp/build && ctest -R "DeterministicProducts|PlanPerBatch|stage09|stage10" -L "gpu|stage" -j4 --timeout 200) > $R/ctest_09_10.log 2>&1
echo "ctest rc $? at $((SECONDS-T0)) s: $(grep -E 'tests passed' $R/ctest_09_10.log)"; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_09_10.log | head -5; tar czf $OUT/call7.tgz -C $OUT call7
for round in 1; do for tree in main new; do
  [ $((SECONDS-T0)) -gt 300 ] && continue
  B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
  timeout 40 $B/bench/cce_bench --shapes=gemma2 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_gemma2_$tree.json --benchmark_out_format=json > $R/bench_gemma2_$tree.txt 2>&1
  echo "gemma2 $tree rc $? $(grep -E 'stage10.*_median' $R/bench_gemma2_$tree.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_gemma2_$tree.txt | awk '{print $2}')"
done; done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call7.tgz call7
