#!/usr/bin/env bash
# Session 46, call 2 (one H200): 9434a5a (the candidate chosen and the pairs kept in one kernel, the masses written
# into page-locked host memory, the counts' copy beside the lists'). Main is `git archive 963ff79` in a copy. While
# lm_data.py trains lm32k's model: both builds, the whole GPU suite and two mutants of the new kernel; then a traced
# call of the change at lm32k's trained data, and cce_bench (the floor and stage 10, loss + grad) of both trees in
# turns: lm32k's trained data four rounds, gpt2's generated data two.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
{ echo "tree: 9434a5a"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; git archive 963ff79 | tar xf - -C /tmp/main-src
(cd /tmp/main-src && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_main.log)"
(timeout 330 python3 scripts/mutants.py --gpu --only g10_masses_not_on_host --only g10_keep_within_budget_one_off --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
while { [ ! -f $R/lm.rc ] || [ ! -f $R/mut.rc ]; } && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc $R/mut.rc 2>/dev/null; tail -4 $R/mutants.txt
timeout 30 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm32k --calls 5 --out $R/timeline_lm32k_trained.txt > $R/timeline.log 2>&1
echo "timeline rc $?"; grep -E "^span|^==" $R/timeline_lm32k_trained.txt
for round in 1 2 3 4; do
  for tree in main new; do
    [ $((SECONDS-T0)) -lt 545 ] || break 2
    B=/tmp/build; C=9434a5a; [ $tree = main ] && B=/tmp/build-main && C=963ff79
    CCE_COMMIT=$C timeout 30 $B/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
      --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
      --benchmark_out=$R/bench_lm32k_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "lm32k round $round $tree rc $?: $(grep -E 'median' $R/bench_${tree}_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
done
for round in 1 2; do
  for tree in main new; do
    [ $((SECONDS-T0)) -lt 560 ] || break 2
    B=/tmp/build; C=9434a5a; [ $tree = main ] && B=/tmp/build-main && C=963ff79
    CCE_COMMIT=$C timeout 30 $B/bench/cce_bench --shapes=gpt2 \
      --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
      --benchmark_out=$R/bench_gpt2_${tree}_$round.json --benchmark_out_format=json > $R/bench_gpt2_${tree}_$round.txt 2>&1
    echo "gpt2 round $round $tree rc $?: $(grep -E 'median' $R/bench_gpt2_${tree}_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
