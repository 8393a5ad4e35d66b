#!/usr/bin/env bash
# Session 43, call 4 (one H200): 134b4c0 (this session's kernels; the tree sent is 134b4c0 with docs only after it).
# Main (3945ca6) is session_code_134b4c0.patch reversed in a copy. While lm_data.py trains lm32k's model: both builds,
# then the whole GPU suite and the op's tests on 134b4c0. Then at lm32k's trained data: cce_bench (the floor and
# stage 10, loss + grad, 50 calls) for the two trees in turns, three rounds; one traced call of each tree.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "tree: 134b4c0"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/main-src; mkdir /tmp/main-src; tar cf - --exclude=.git . | tar xf - -C /tmp/main-src
(cd /tmp/main-src && git apply -R docs/profiles/session43_h200/session_code_134b4c0.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main cce_bench cce_capi) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: $(tail -1 $R/build_main.log)"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
while [ ! -f $R/lm.rc ] && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc 2>/dev/null
for round in 1 2 3; do
  for tree in main new; do
    [ $((SECONDS-T0)) -lt 530 ] || break 2
    B=/tmp/build; C=134b4c0; [ $tree = main ] && B=/tmp/build-main && C=3945ca6
    CCE_COMMIT=$C timeout 40 $B/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
      --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
      --benchmark_out=$R/bench_lm32k_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "round $round $tree rc $?: $(grep -E 'median' $R/bench_${tree}_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
  done
done
for tree in main new; do
  [ $((SECONDS-T0)) -lt 560 ] || break
  B=/tmp/build/python; [ $tree = main ] && B=/tmp/build-main/python
  timeout 30 python3 bench/stage_timeline.py $B /tmp/cce-lm-data/lm32k --calls 5 --out $R/timeline_lm32k_$tree.txt > $R/timeline_$tree.log 2>&1
  echo "timeline $tree rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_$tree.txt
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
