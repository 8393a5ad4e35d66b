#!/usr/bin/env bash
# Session 27, calls 3 and 4 (carrying QuACK's other wheels and cut-cross-entropy's and Liger's): bench/peers.py,
# every implementation (stage 10's op among them), loss + grad, one process per shape in the order given, each its
# own file; a shape whose file is there is kept; none starts after $STOP s. Then the op's tests with the time left.
set -o pipefail
T0=$SECONDS
STOP=${STOP:-450}
R=$OUT/c3; mkdir -p $R /tmp/sweep
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/part.00 /tmp/q/part.01 .quack-wheels/part.02 > /tmp/q/cu13.whl
  for w in /tmp/q/cu13.whl .quack-wheels/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
fi
export PYTHONPATH=/tmp/site:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt
echo "install $((SECONDS-T0)) s"
for s in ${SHAPES:-gemma2_flat lm128k lm32k llama3 gemma2 gpt2 gemma2_softcap lm128k_s0 lm128k_s30 lm128k_s100 lm128k_s300}; do
  f=/tmp/sweep/peers_$s.json
  [ -f $f ] && continue
  [ $((SECONDS-T0)) -gt $STOP ] && { echo "not started: $s"; continue; }
  floor=/tmp/sweep/bench_gen.json; case $s in lm128k*) floor=/tmp/sweep/bench_lm128k.json;; esac
  PYTHONUNBUFFERED=1 timeout $((585 - (SECONDS - T0))) python3 bench/peers.py --shapes $s --lm-data /tmp/cce-lm-data --modes loss_grad \
    --cce-python /tmp/build/python --floor-json $floor --out $f.part > $R/peers_$s.txt 2>&1 && mv $f.part $f
  echo "$s rc $? at $((SECONDS-T0)) s"; cp $f $R/ 2>/dev/null
done
if [ -n "$OPTESTS" ] && [ $((SECONDS-T0)) -lt 400 ]; then
  (cd /tmp/build && timeout $((585 - (SECONDS - T0))) ctest -L pytorch -j2 --timeout 200 > $R/ctest_pytorch.log 2>&1)
  grep -E "tests passed|\(Failed\)|Timeout|Total Test" $R/ctest_pytorch.log | head
fi
grep -h median $R/peers_*.txt 2>/dev/null | head -80
tar czf $OUT/c3.tgz -C $OUT c3 && rm -r $R
echo "total $((SECONDS-T0)) s"
