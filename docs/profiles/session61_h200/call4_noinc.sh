#!/usr/bin/env bash
# Session 61, call 4 (one H200, fresh machine): the warp-specialized owners whose producer threads never wait for
# their own copies (cp.async.mbarrier.arrive.noinc on the step's full mbarrier; the consumers fence the proxies after
# it), against main's tree (ws_vs_main.patch reversed): stage 10's check at 300 x 200 x 20001 (bf16, backward,
# sparse plan: gathered rows) and racecheck / synccheck on it, the kept-tile kernels' time on llama3's shape with every
# pair kept (ncu), and the warp states of one dC launch of each tree (stall reasons in text).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start noinc
targets="stage10_plan_per_batch"
tree_without /tmp/main-tree docs/profiles/session61_h200/ws_vs_main.patch
(build /tmp/build-main /tmp/main-tree $targets > $R/build_main.log 2>&1; echo "main build rc $?") &
build /tmp/build . $targets > $R/build.log 2>&1 || { echo "ws build failed"; grep -B2 -A8 -i error $R/build.log | head -30; }
wait; echo "builds $((SECONDS-T0)) s"
small="--n 300 --d 200 --v 20001 --dtype bf16 --data realistic --check --backward --plan sparse --iters 0"
/tmp/build/stages/stage10_plan_per_batch $small > $R/check_ws.txt 2>&1; echo "ws check rc $?: $(tail -3 $R/check_ws.txt | tr '\n' ' ')"
for tool in racecheck synccheck; do
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 1 /tmp/build/stages/stage10_plan_per_batch $small \
    > $R/sanitizer_$tool.txt 2>&1
  echo "ws $tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$tool.txt)"
done
dense_kept_kernels main=/tmp/build-main noinc=/tmp/build
flat="--n 8192 --d 4096 --v 128256 --dtype bf16 --data random --seed 1234 --backward --plan sparse --iters 0"
for pair in main=/tmp/build-main noinc=/tmp/build; do
  tree=${pair%%=*}; dir=${pair#*=}
  timeout 60 ncu --section WarpStateStats --section SchedulerStats --section LaunchStats --print-details all \
    -k regex:dc_products -s 3 -c 1 $dir/stages/stage10_plan_per_batch $flat > $R/ncu_warps_dc_$tree.txt 2>&1
  echo "ncu warps dc $tree rc $? ($((SECONDS-T0)) s)"
done
cd $OUT && tar czf noinc.tgz noinc
