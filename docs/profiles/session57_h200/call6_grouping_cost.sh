#!/usr/bin/env bash
# Session 57, call 6 (one H200, a fresh machine, about 300 s of device time left; run as CCE_COMMIT=<branch HEAD>
# bash <this>): what the grouping by the count's power of two, the rarest tile and the count (branch
# wip/s57-rarest-grouping) costs on the GPU against main's count order, and whether its kernels are sanitizer-clean.
# Stage 10 of the branch in /tmp/build, of main's tree (the branch's change reversed in a copy) in /tmp/build-main;
# compute-sanitizer memcheck and racecheck on the branch at a small shape with --check; ncu's duration of the grouping's
# kernels (token_*, tile_rank, the radix sort's) in both, at lm32k's shape (generated data; the kernels' cost depends
# on N and the tiles) and at gemma2's while time is left.
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
rm -rf /tmp/main-tree && mkdir -p /tmp/main-tree && tar --exclude=./.git -cf - . | tar -xf - -C /tmp/main-tree
patch -R -p1 -d /tmp/main-tree < docs/profiles/session57_h200/bucket_rarest_grouping.patch > $R/patch_reverse.log 2>&1 \
  || echo "reversing the change in the copy failed"
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S /tmp/main-tree -B /tmp/build-main $CM && ninja -C /tmp/build-main stage10_plan_per_batch) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call6.tgz call6; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 1 $S10 --n 300 --d 200 --v 20001 --dtype bf16 --data realistic \
    --plan sparse --check --backward --iters 0 > $R/sanitizer_$tool.txt 2>&1
  echo "$tool rc $? at $((SECONDS-T0)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $R/sanitizer_$tool.txt)"
done
for shape in "lm32k 768 32000" "gemma2 2304 256000"; do
  set -- $shape
  for tree in main bucket; do
    [ $((SECONDS-T0)) -gt 190 ] && break 2
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout 40 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:'token_|tile_rank|Radix|Onesweep' \
      $B/stages/stage10_plan_per_batch --n 8192 --d $2 --v $3 --dtype bf16 --data realistic --seed 1234 --plan sparse \
      --backward --iters 0 > $R/ncu_$1_$tree.txt 2>&1
    echo "$1 $tree rc $? at $((SECONDS-T0)) s: $(grep -E 'gpu__time_duration' $R/ncu_$1_$tree.txt | awk '{s += $NF} END {print NR " kernels, " s " (ncu units) in all"}')"
  done
done
cd $OUT && tar czf call6.tgz call6
