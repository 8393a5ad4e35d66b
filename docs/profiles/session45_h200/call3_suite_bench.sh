#!/usr/bin/env bash
# Session 45, call 3 (one H200): 9064f24 (the dependent launches of call 2; one block reduction). Main (231f067) is
# `git archive 231f067` in a copy. While lm_data.py trains lm32k's model: both builds, the whole GPU suite and the
# mutants g_dependent_launch_without_wait and g_block_sum_half_the_warps; then at lm32k's trained data cce_bench (the floor and stage 10, loss +
# grad) for the two trees in turns, three rounds; then the op's tests.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ echo "tree: 9064f24"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; git archive 231f067 | tar xf - -C /tmp/main-src
(cd /tmp/main-src && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench cce_capi) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_main.log)"
(timeout 330 python3 scripts/mutants.py --gpu --only g_dependent_launch_without_wait --only g_block_sum_half_the_warps --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
while { [ ! -f $R/lm.rc ] || [ ! -f $R/mut.rc ]; } && [ $((SECONDS-T0)) -lt 450 ]; do sleep 2; done; cat $R/lm.rc $R/mut.rc 2>/dev/null; tail -3 $R/mutants.txt
for round in 1 2 3; do
  for tree in main new; do
    [ $((SECONDS-T0)) -lt 500 ] || break 2
    B=/tmp/build; C=9064f24; [ $tree = main ] && B=/tmp/build-main && C=231f067
    CCE_COMMIT=$C timeout 40 $B/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
      --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
      --benchmark_out=$R/bench_lm32k_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "round $round $tree rc $?: $(grep -E 'median' $R/bench_${tree}_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
done
if [ $((SECONDS-T0)) -lt 490 ]; then
  (cd /tmp/build && timeout $((570-(SECONDS-T0))) ctest -R pytorch.op -j4 --timeout 200) > $R/ctest_op.log 2>&1
  echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
