#!/usr/bin/env bash
# Session 29, call 3 (carrying QuACK's last wheel part, its other wheels, cut-cross-entropy's and Liger's):
# bench/peers.py --interleave, loss + grad, every implementation (stage 10's op among them) timed in turns, one
# process per shape, the floor_ratio from call 2's cce_bench; none starts after $STOP s.
set -o pipefail
T0=$SECONDS
STOP=${STOP:-420}
R=$OUT/c3; mkdir -p $R /tmp/s29
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/part.00 /tmp/q/part.01 .quack-wheels/part.02 > /tmp/q/cu13.whl
  for w in /tmp/q/cu13.whl .quack-wheels/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
fi
export PYTHONPATH=/tmp/site:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
echo "install $((SECONDS-T0)) s"
for s in ${SHAPES:-lm128k_s0 gemma2_flat lm128k_s30 lm128k_s100}; do
  f=/tmp/s29/peers_$s.json
  [ -f $f ] && continue
  [ $((SECONDS-T0)) -gt $STOP ] && { echo "not started: $s"; continue; }
  PYTHONUNBUFFERED=1 timeout $((585 - (SECONDS - T0))) python3 bench/peers.py --interleave --reps ${REPS:-20} --shapes $s \
    --lm-data /tmp/cce-lm-data --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s29/bench.json \
    --out $f.part > $R/peers_$s.txt 2>&1 && mv $f.part $f
  echo "$s rc $? at $((SECONDS-T0)) s"; cp $f $R/ 2>/dev/null
done
grep -h " ms " $R/peers_*.txt 2>/dev/null | head -60
tar czf $OUT/c3.tgz -C $OUT c3 && rm -r $R
echo "total $((SECONDS-T0)) s"
