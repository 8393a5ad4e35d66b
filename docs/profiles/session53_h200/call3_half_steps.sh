#!/usr/bin/env bash
# Session 53, call 3 (one H200): stage 10's candidates half an exponent apart (2^-8, 2^-8.5 .. 2^-17), budget
# 0.022 unchanged. The whole GPU suite on this tree while lm128k's model trains once beside it; then the stage
# executable's candidates line at the five snapshots (R at every half candidate), peers.py (eager PyTorch, stage 10's
# op at its automatic eps) at four snapshots, and the op at fixed eps around each snapshot's choice: time, dE and dC
# against eager's on the same inputs, to see which half candidates keep the errors at or below eager's.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 330 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_gpu.log | head -20
grep -E "expected eps|picks 2" $R/ctest_gpu.log | head -4
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 400 ]; do sleep 2; done; cat $R/lm_data.rc
for s in lm128k lm128k_s300 lm128k_s100 lm128k_s30 lm128k_s0; do
  timeout 15 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 5 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'drop   |candidates' $R/exec_$s.txt | tr -s ' ' | cut -c1-330 | tr '\n' ' ')"
done
P="python3 bench/peers.py --modes loss_grad --reps 10 --lm-data /tmp/cce-lm-data --cce-python /tmp/build/python"
timeout 120 $P --shapes lm128k,lm128k_s300,lm128k_s100,lm128k_s30 --impls peer_torch_eager,stage10_plan_per_batch_op \
  --out $R/peers_auto.json > $R/peers_auto.txt 2>&1
echo "auto rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_auto.txt | cut -c1-150
sweep() {  # shape, then exponents
  local s=$1; shift
  for e in "$@"; do
    [ $((SECONDS-T0)) -lt 575 ] || { echo "no time for $s 2^-$e"; continue; }
    timeout $((590 - (SECONDS-T0))) $P --shapes $s --impls stage10_plan_per_batch_op \
      --stage-flags "--drop-eps $(python3 -c "print(2.0**-$e)")" --out $R/peers_${s}_$e.json > $R/peers_${s}_$e.txt 2>&1
    echo "$s 2^-$e: $(grep -E " ms " $R/peers_${s}_$e.txt | cut -c40-150)"
  done
}
sweep lm128k 12.5 12; sweep lm128k_s300 12.5 12; sweep lm128k_s100 14.5 15.5; sweep lm128k_s30 16.5 16
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
