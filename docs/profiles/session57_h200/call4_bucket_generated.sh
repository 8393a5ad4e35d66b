#!/usr/bin/env bash
# Session 57, call 4 (one H200, a fresh machine, about 330 s of device time left; run as CCE_COMMIT=<branch HEAD>
# bash <this>): the grouping by the count's power of two, then the rarest tile, then the count (branch
# wip/s57-rarest-grouping's second commit) built in /tmp/build, main's tree (the branch's change reversed in a copy)
# in /tmp/build-main; the grouping's GPU test; then stage 10 (loss + grad) of both in turns at the generated shapes
# gpt2, llama3, gemma2 (no training needed), where the rarest tile alone kept more pairs than main (call 3); then
# stage 10's other GPU tests (PlanPerBatch.*) while time is left.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
rm -rf /tmp/main-tree && mkdir -p /tmp/main-tree && tar --exclude=./.git -cf - . | tar -xf - -C /tmp/main-tree
patch -R -p1 -d /tmp/main-tree < docs/profiles/session57_h200/bucket_rarest_grouping.patch > $R/patch_reverse.log 2>&1 \
  || echo "reversing the change in the copy failed"
(cmake -S /tmp/main-tree -B /tmp/build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-main bench/cce_bench) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build test_stages_gpu bench/cce_bench) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 60 ctest -R "PlanPerBatch.TokenGrouping|PlanPerBatch.Without" --output-on-failure) > $R/ctest_grouping.log 2>&1
echo "grouping tests rc $?: $(grep -E 'tests passed' $R/ctest_grouping.log)"
for round in 1 2 3; do
  for tree in main bucket; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    [ $((SECONDS-T0)) -gt 250 ] && break 2
    timeout 60 $B/bench/cce_bench --shapes=gpt2,llama3,gemma2 --benchmark_filter='^stage10_plan_per_batch/loss_grad/' \
      --benchmark_out=$R/bench_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
    echo "$tree round $round rc $? at $((SECONDS-T0)) s"
    grep -E "_median" $R/bench_${tree}_$round.txt | grep -oE "^[a-z0-9_]+/loss_grad/[a-z0-9_]+|manual_time_median +[0-9.]+|kept_frac=[0-9.]+" | paste -sd' ' | sed 's/ \([a-z0-9_]*\/loss_grad\)/\n\1/g'
  done
done
(cd /tmp/build && timeout $((300 - (SECONDS-T0))) ctest -R "PlanPerBatch" -j4 --timeout 100) > $R/ctest_stage10.log 2>&1
echo "stage 10 tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_stage10.log)"; grep -E '\*\*\*Failed|Timeout' $R/ctest_stage10.log | head
cd $OUT && tar czf call4.tgz call4
