#!/usr/bin/env bash
# Session 57, call 3 (one H200, a fresh machine; run as CCE_COMMIT=<branch HEAD> bash <this> on a checkout of branch
# wip/s57-rarest-grouping, the device copy's git HEAD being stale): the branch built in /tmp/build, main's tree (the
# branch's change reversed in a copy) in /tmp/build-main; lm32k's and lm128k's models trained beside the builds; the
# whole GPU suite on the branch. Call 4 (call4_rarest_bench.sh, right after on the same warm machine) times both.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
rm -rf /tmp/main-tree && mkdir -p /tmp/main-tree && tar --exclude=./.git -cf - . | tar -xf - -C /tmp/main-tree
patch -R -p1 -d /tmp/main-tree < docs/profiles/session57_h200/rarest_grouping.patch > $R/patch_reverse.log 2>&1 \
  || echo "reversing the change in the copy failed"
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
(cmake -S /tmp/main-tree -B /tmp/build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-main bench/cce_bench) > $R/build_main.log 2>&1 || echo "main's build failed"
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 60 ctest -R "PlanPerBatch.TokenGrouping|PlanPerBatch.Without" --output-on-failure) > $R/ctest_grouping.log 2>&1
echo "grouping tests rc $?: $(grep -E 'tests passed' $R/ctest_grouping.log)"
(cd /tmp/build && timeout $((585 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
