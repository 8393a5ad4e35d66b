#!/usr/bin/env bash
# Session 50, call 2 (one H200; session 49's branch wip/s49-unkept-bulk on main 7472809, not yet run on a GPU):
# dc_unkept_rows' common case (a tile without targets: every row the same) writes its rows by Hopper's bulk copies,
# one instruction a row from one copy of the row in shared memory (unkept_bulk_rows.patch); session 49 found the
# kernel at 64-67% of DRAM's peak where the sort key reaches 86%. "new" is the branch's tree, "main" a copy with the
# patch reversed. ncu of the kernel at gemma2 and llama3 on both; stages 09 and 10's GPU tests on new;
# compute-sanitizer memcheck, racecheck and synccheck of stage 10 on a shape with unkept tiles; cce_bench (floor,
# stage 10, loss + grad) at gemma2 and llama3 in turns, two rounds.
T0=$SECONDS
R=$OUT/bulk; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session50_h200/unkept_bulk_rows.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench stage10_plan_per_batch) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf bulk.tgz bulk; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s"
for shape in "gemma2 2304 256000" "llama3 4096 128256"; do
  set -- $shape
  for tree in main new; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      -k regex:dc_unkept_rows $B/stages/stage10_plan_per_batch --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_$1_$tree.txt 2>&1
    echo "$1 $tree rc $?: $(grep -E 'gpu__time_duration|dram__throughput' $R/ncu_$1_$tree.txt | awk '{print $1, $NF}' | tr '\n' ' ')"
  done
done
tar czf $OUT/bulk.tgz -C $OUT bulk
S10=/tmp/build/stages/stage10_plan_per_batch
for tool in memcheck racecheck synccheck; do
  timeout 120 compute-sanitizer --tool $tool $S10 --n 300 --d 200 --v 20001 --dtype bf16 --data realistic --plan sparse --check --backward --iters 0 > $R/sanitizer_$tool.txt 2>&1
  echo "$tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|check +(PASSED|FAILED)' $R/sanitizer_$tool.txt | tr '\n' ' ')"
done
(cd /tmp/build && ctest -R "DeterministicProducts|PlanPerBatch|stage09|stage10" -L "gpu|stage" -j4 --timeout 200) > $R/ctest_09_10.log 2>&1
echo "ctest rc $? at $((SECONDS-T0)) s: $(grep -E 'tests passed' $R/ctest_09_10.log)"; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_09_10.log | head -5
tar czf $OUT/bulk.tgz -C $OUT bulk
for round in 1 2; do for shape in gemma2 llama3; do for tree in main new; do
  [ $((SECONDS-T0)) -gt 540 ] && continue
  B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
  timeout 40 $B/bench/cce_bench --shapes=$shape --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_${shape}_${tree}_$round.json --benchmark_out_format=json > $R/bench_${shape}_${tree}_$round.txt 2>&1
  echo "$shape $tree $round rc $? $(grep -E 'stage10.*_median' $R/bench_${shape}_${tree}_$round.txt | awk '{print $2}') floor $(grep -E 'cublas_floor.*_median' $R/bench_${shape}_${tree}_$round.txt | awk '{print $2}')"
done; done; done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf bulk.tgz bulk
