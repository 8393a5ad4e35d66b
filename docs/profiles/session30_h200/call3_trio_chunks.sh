#!/usr/bin/env bash
# Session 30, call 3 (from session 29's next_lm128k_s0.sh). The last of three calls on one warm machine:
# call1_op_tests_data.sh and call2_sparse_heads.sh first (they carry QuACK's wheel parts 00 and 01, build, and write
# lm128k's data and the floor's JSON), then this one with parts 02, rest and .whl carried. At lm128k_s0:
#  1. torch.compile, stage 10's op and QuACK in turns (peers.py --interleave, the order reversed every other round);
#  2. stage 10's executable with one chunk and with chunks of 4096 and 2048 rows (dC in fp32, rounded once at the
#     end), to see what dC's one-chunk cuBLASLt product costs against chunked ones.
set -o pipefail
T0=$SECONDS
R=$OUT/c3; mkdir -p $R
if [ ! -d /tmp/qsite/quack ]; then
  cat /tmp/q/part.00 /tmp/q/part.01 .quack-wheels/part.02 > /tmp/q/cu13.whl
  for w in /tmp/q/cu13.whl .quack-wheels/rest/*.whl; do python3 -m zipfile -e "$w" /tmp/qsite; done
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1
fi
export PYTHONPATH=/tmp/site:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
PYTHONUNBUFFERED=1 timeout 300 python3 bench/peers.py --interleave --reps 30 --shapes lm128k_s0 \
  --impls peer_torch_compile,stage10_plan_per_batch_op,peer_quack --lm-data /tmp/cce-lm-data --modes loss_grad \
  --cce-python /tmp/build/python --floor-json /tmp/s30/bench.json --out $R/trio_lm128k_s0.json > $R/trio_lm128k_s0.txt 2>&1
echo "trio rc $? at $((SECONDS-T0)) s"; grep " ms " $R/trio_lm128k_s0.txt | cut -c1-80
for rows in 8192 4096 2048 8192; do
  timeout 60 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/lm128k_s0 --plan dense \
    --dense-chunk-rows $rows --iters 20 > $R/chunks_$rows.txt 2>&1
  echo "chunk rows $rows rc $?: $(grep -iE 'median|ms' $R/chunks_$rows.txt | tail -2 | tr '\n' ' ')"
done
tar czf $OUT/c3.tgz -C $OUT c3 && rm -r $R
echo "total $((SECONDS-T0)) s"
