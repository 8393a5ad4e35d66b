#!/usr/bin/env bash
# Session 56, call 3 (one H200, a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>, the device copy's git HEAD
# being stale): stage 10's candidates a quarter exponent apart (branch wip/s56-quarter-eps): the build and the whole
# GPU suite, while bench/lm_data.py trains lm32k's and lm128k's models beside it for call 4. Nothing is timed here.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout $((585 - (SECONDS-T0))) ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run|Failed  ' $R/ctest_gpu.log | head -20
grep -E "budget .*expected eps|default budget" /tmp/build/Testing/Temporary/LastTest.log | head -4
wait; cat $R/lm_data_*.rc; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
