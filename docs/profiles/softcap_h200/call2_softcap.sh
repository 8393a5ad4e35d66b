#!/usr/bin/env bash
# Session 24, call 2: the softcap in the fold's epilogue. Trees: t0 = main (2185f93), t1 = the softcap and the mask in
# two loops (4b8ac91), t2 = t1 + the softcap through one ex2 and one reciprocal (e6b7d78, the working tree).
# gemma2's shape, realistic data: stage 03's forward with --softcap 30 and without, stage 10's loss + grad with
# --softcap 30; trees alternating, two rounds. Then the whole GPU suite on t2 with the time left.
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
for t in t0 t1; do
  (rm -rf /tmp/src-$t && mkdir -p /tmp/src-$t && tar -xf .device-deps/s24/$t.tar -C /tmp/src-$t && cmake -S /tmp/src-$t -B /tmp/build-$t -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-$t stage03_fused_gemm_ce stage10_plan_per_batch) > $R/build_$t.log 2>&1 &
done
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
wait
echo "builds $((SECONDS-T0)) s: $(ls /tmp/build-t0/stages/stage10_plan_per_batch /tmp/build-t1/stages/stage10_plan_per_batch 2>&1 | wc -l) side trees"
G="--n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234"
for round in 1 2; do for t in t0 t1 t2; do
  [ $((SECONDS-T0)) -gt 330 ] && break 2
  B=/tmp/build-$t; [ $t = t2 ] && B=/tmp/build
  f=$R/${t}_r$round.txt
  { timeout 60 $B/stages/stage03_fused_gemm_ce $G --softcap 30 --iters 20 | sed 's/^/s03 cap30 /'
    timeout 60 $B/stages/stage03_fused_gemm_ce $G --iters 20 | sed 's/^/s03 cap0 /'
    timeout 90 $B/stages/stage10_plan_per_batch $G --softcap 30 --backward --iters 10 | sed 's/^/s10 cap30 /'; } > $f 2>&1
  echo "r$round $t: $(grep ' time ' $f | sed -E 's/ +/ /g; s/time //; s/\(median of [0-9]+\)//' | tr '\n' '|') ($((SECONDS-T0)) s)"
done; done
(cd /tmp/build && timeout $((575 - (SECONDS - T0))) ctest -L "gpu|stage" -j4 --timeout 240 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout|Not Run" $R/ctest_gpu.log | head
(cd $OUT && tar -czf c2.tgz c2 && rm -r c2)
echo "total $((SECONDS-T0)) s"
