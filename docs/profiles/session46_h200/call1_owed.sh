#!/usr/bin/env bash
# Session 46, call 1 (one H200), on 0f8bbd4 as committed: what session 45 owed (tests/gpu/test_dependent_launch.cu's
# DependentLaunch.* first, the whole GPU suite, the mutant g_dependent_launch_without_wait whose tests now name them);
# while they run, lm_data.py trains lm32k's model; then at lm32k's trained data a traced call of stage 10 (with the
# host's API calls) and cce_bench (the floor and stage 10, loss + grad) three runs.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ echo "tree: 0f8bbd4"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "^DependentLaunch" --output-on-failure --timeout 60) > $R/ctest_dependent_launch.log 2>&1
echo "DependentLaunch rc $?"; grep -E "Test +#|tests passed|tests failed" $R/ctest_dependent_launch.log
(timeout 330 python3 scripts/mutants.py --gpu --only g_dependent_launch_without_wait --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
while { [ ! -f $R/lm.rc ] || [ ! -f $R/mut.rc ]; } && [ $((SECONDS-T0)) -lt 450 ]; do sleep 2; done; cat $R/lm.rc $R/mut.rc 2>/dev/null; tail -3 $R/mutants.txt
if [ -f /tmp/cce-lm-data/lm32k/e.npy ]; then
  timeout 40 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm32k --calls 5 --host --out $R/timeline_lm32k_trained.txt > $R/timeline.log 2>&1
  echo "timeline rc $? at $((SECONDS-T0)) s"; grep -E "^span|^==" $R/timeline_lm32k_trained.txt
  for round in 1 2 3; do
    [ $((SECONDS-T0)) -lt 520 ] || break
    CCE_COMMIT=0f8bbd4 timeout 40 /tmp/build/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
      --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
      --benchmark_out=$R/bench_lm32k_$round.json --benchmark_out_format=json > $R/bench_$round.txt 2>&1
    echo "round $round rc $?: $(grep -E 'median' $R/bench_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
