#!/usr/bin/env bash
# Session 24, call 4 (branch wip/softcap-rcp, a1806a7 = main + the softcap's reciprocal through rcp.approx): the whole
# GPU suite on it; then stage 03's forward at gemma2's shape with softcap 30 against main's tree (t2.tar, e6b7d78's
# code), one run each, alternating. Everything is written under $OUT as it goes (no tar): a cut call keeps it.
set -o pipefail
T0=$SECONDS
R=$OUT/c4; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
(rm -rf /tmp/src-t2 && mkdir -p /tmp/src-t2 && tar -xf .device-deps/s24/t2.tar -C /tmp/src-t2 && cmake -S /tmp/src-t2 -B /tmp/build-t2 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-t2 stage03_fused_gemm_ce) > $R/build_main.log 2>&1 &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout $((290 - (SECONDS - T0))) ctest -L "gpu|stage" -j6 --timeout 200 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run" $R/ctest_gpu.log | head
echo "suite $((SECONDS-T0)) s"
wait
G="--n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --softcap 30 --iters 20"
for t in main rcp main rcp; do
  [ $((SECONDS-T0)) -gt 318 ] && break
  B=/tmp/build; [ $t = main ] && B=/tmp/build-t2
  timeout 25 $B/stages/stage03_fused_gemm_ce $G >> $R/s03_cap30_$t.txt 2>&1
  echo "$t: $(grep ' time ' $R/s03_cap30_$t.txt | tail -1 | sed -E 's/ +/ /g') ($((SECONDS-T0)) s)"
done
echo "total $((SECONDS-T0)) s"
