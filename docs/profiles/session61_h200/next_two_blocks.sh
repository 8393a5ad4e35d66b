#!/usr/bin/env bash
# For a next session (written in session 61, not run): one H200, a fresh machine; run as CCE_COMMIT=<hash> bash <this>
# on a checkout with ws_two_blocks.patch applied (git apply; branch wip/s61-ws-two-blocks). Stage 09's kept-tile owners
# warp-specialized with two blocks an SM: a producer warp (lanes find two rows each and shuffle them round; copies
# arrive on the full mbarrier; sources two steps ahead) and two consumer warpgroups over three 32 KB stages, 288
# threads, 96 registers. Three trees: main's (the patch reversed), the patch (a consumer keeps one wgmma group in
# flight before it gives a stage back), and the patch with none in flight (the producer a step further ahead).
# Stage 10's check and compute-sanitizer racecheck / synccheck on the patch's tree; the kept-tile kernels' TFLOP/s at
# llama3's dense kept set (issue 25: 550; main's loop 429-438 dE, 460-464 dC in session 61); stage 10's loss + grad
# in turns, two rounds, gpt2, llama3, gemma2. About 380 s. If the patch wins: the whole GPU suite next (and lm32k).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start two_blocks
tree_without /tmp/main-tree docs/profiles/session61_h200/ws_two_blocks.patch
tree_with_edit /tmp/none-tree stages/09_deterministic_products/kept_products.cu \
  's/constexpr int kWgmmaInFlight = 1;/constexpr int kWgmmaInFlight = 0;/' || exit 1
builds_side_by_side "bench/cce_bench stage10_plan_per_batch stage09_deterministic_products" \
  main=/tmp/main-tree none=/tmp/none-tree patch=.
small="--n 300 --d 200 --v 20001 --dtype bf16 --data realistic --check --backward --iters 0"
for tree in build build-none; do
  for stage in stage09_deterministic_products stage10_plan_per_batch; do
    /tmp/$tree/stages/$stage $small > $R/check_${tree}_$stage.txt 2>&1
    echo "$tree $stage check rc $?: $(grep -E 'check +(PASSED|FAILED)' $R/check_${tree}_$stage.txt)"
  done
done
for stage in stage09_deterministic_products stage10_plan_per_batch; do
  for tool in racecheck synccheck; do
    timeout 40 compute-sanitizer --tool $tool --error-exitcode 1 /tmp/build/stages/$stage $small \
      > $R/sanitizer_${stage}_$tool.txt 2>&1
    echo "$stage $tool rc $?: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_${stage}_$tool.txt)"
  done
done
dense_kept_kernels main=/tmp/build-main two=/tmp/build none=/tmp/build-none
stage10_rounds 2 gpt2,llama3,gemma2 main=/tmp/build-main two=/tmp/build none=/tmp/build-none
cd $OUT && tar czf two_blocks.tgz two_blocks
