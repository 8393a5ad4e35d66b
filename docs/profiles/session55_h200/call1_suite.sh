#!/usr/bin/env bash
# Session 55, call 1 (one H200; run as CCE_COMMIT=<HEAD> bash <this>, the device copy's git HEAD being stale): the
# build and the whole GPU suite on HEAD (candidate_index: host code of stage 10), while bench/lm_data.py trains
# lm32k's and lm128k's models beside it for calls 2 and 3. Nothing is timed in this call.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 480 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout $((585 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
grep -E "^ *[0-9]+/[0-9]+ Test" $R/ctest_gpu.log | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/' | sort > $R/finished.txt; wc -l < $R/finished.txt
cat $R/lm_data.rc 2>/dev/null; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
