#!/usr/bin/env bash
# branch wip/s55-minhash-grouping on one H200, call A (run as
# CCE_COMMIT=<branch HEAD> bash <this> on a checkout of the branch): the branch built in /tmp/build, main's tree (the
# branch's change reversed in a copy) in /tmp/build-main; lm32k's and lm128k's models trained beside the builds; the
# whole GPU suite on the branch. Call 2 (call2_minhash_bench.sh, right after on the same warm machine) times both in turns.
T0=$SECONDS
R=$OUT/minhash_a; mkdir -p $R /tmp/cce-inputs
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
rm -rf /tmp/main-tree && mkdir -p /tmp/main-tree && tar --exclude=./.git -cf - . | tar -xf - -C /tmp/main-tree
patch -R -p1 -d /tmp/main-tree < docs/profiles/session55_h200/minhash_grouping.patch > $R/patch_reverse.log 2>&1 \
  || echo "reversing the change in the copy failed"
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf minhash_a.tgz minhash_a; exit 1; }
(cmake -S /tmp/main-tree -B /tmp/build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-main bench/cce_bench) > $R/build_main.log 2>&1 || echo "main's build failed"
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout $((585 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout' $R/ctest_gpu.log | head -20
cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf minhash_a.tgz minhash_a
