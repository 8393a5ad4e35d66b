#!/usr/bin/env bash
# Session 63, call 4 (run as CCE_COMMIT=<HEAD> bash <this>): stage 06's (and 07's) backward products adding a tile's
# sums as 16-byte vector atomics where D % 4 == 0 (quad_atomics.patch), against main's tree (the patch reversed),
# stages 06 and 07 built side by side. Checks at odd shapes (D = 100: quads with a last quad past D; 102: pairs; 101:
# scalars), memcheck at D = 100; then stage 06's loss + grad at gemma2_flat's shape, the trees in turns, two rounds.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call4
tree_without /tmp/main-tree docs/profiles/session63_h200/quad_atomics.patch
builds_side_by_side "stage06_fused_backward stage07_filter_sort" new=. main=/tmp/main-tree
for d in 100 102 101; do
  for stage in stage06_fused_backward stage07_filter_sort; do
    timeout 60 /tmp/build/stages/$stage --n 77 --d $d --v 1129 --dtype bf16 --data realistic --backward --check \
      --iters 0 > $R/check_${stage}_d$d.txt 2>&1
    echo "$stage D=$d rc $?: $(grep -iE 'check +(PASSED|FAILED)' $R/check_${stage}_d$d.txt | head -2 | paste -sd' ')"
  done
done
timeout 60 /tmp/build/stages/stage06_fused_backward --n 300 --d 200 --v 20001 --dtype bf16 --data realistic --backward \
  --check --iters 0 > $R/check_stage06_300.txt 2>&1
echo "stage06 300x200x20001 rc $?: $(grep -iE 'check +(PASSED|FAILED)' $R/check_stage06_300.txt | paste -sd' ')"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 /tmp/build/stages/stage06_fused_backward --n 77 --d 100 \
  --v 1129 --dtype bf16 --data realistic --backward --check --iters 0 > $R/memcheck_stage06.txt 2>&1
echo "memcheck rc $?: $(grep -E 'ERROR SUMMARY' $R/memcheck_stage06.txt)"
for round in 1 2; do
  for tree in main new; do
    dir=/tmp/build; [ $tree = main ] && dir=/tmp/build-main
    [ $((SECONDS-T0)) -gt 540 ] && break
    timeout 120 $dir/stages/stage06_fused_backward --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --backward \
      --iters 3 > $R/gemma2_flat_${tree}_$round.txt 2>&1
    echo "$tree round $round rc $? at $((SECONDS-T0)) s: $(grep -E '^ *time' $R/gemma2_flat_${tree}_$round.txt)"
  done
done
cd $OUT && tar czf call4.tgz call4 && rm -rf call4
