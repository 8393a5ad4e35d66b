#!/usr/bin/env bash
# For a next session (written in session 56, not run): half against quarter candidates on ONE training, one H200,
# a fresh machine (run as CCE_COMMIT=<HEAD> bash <this>): lm32k's and lm128k's models trained beside the build, then
# bench/drop_eps_sweep at each shape: the automatic eps (quarter steps) beside the fixed eps of the half-step choice
# and its neighbours, with the tail correction, kept share, dE / dC against fp32, median ms of 20 (about 400 s).
T0=$SECONDS
R=$OUT/quarter_ab; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build bench/drop_eps_sweep) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
wait; cat $R/lm_data_*.rc
sweep() {  # shape exponents
  timeout $((585 - (SECONDS-T0))) /tmp/build/bench/drop_eps_sweep --shapes=$1 --lm-data=/tmp/cce-lm-data \
    --exponents=$2 --corrections=dE+dC --iters=20 --out=$R/sweep_$1.json > $R/sweep_$1.txt 2>&1
  echo "sweep $1 rc $? at $((SECONDS-T0)) s"; cat $R/sweep_$1.txt
}
sweep lm128k auto,12.5,12.75,13
sweep lm32k auto,8.5,8.75,9
cd $OUT && tar czf quarter_ab.tgz quarter_ab
