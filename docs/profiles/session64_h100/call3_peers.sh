#!/usr/bin/env bash
# Session 64, calls 3 and 4 (call 2's warm machine: build, training, inputs and floor in /tmp; carry [".whl"]: the
# wheels of cut-cross-entropy 25.1.1 and liger-kernel 0.8.5; run as CCE_COMMIT=<HEAD> NAME=call3 SETS="a:s1,s2 b:s3"
# [LIMIT=seconds] [STOP=seconds] bash <this>): bench/peers.py --interleave, 15 rounds, the order reversed every other round: eager PyTorch,
# torch.compile, stage 10's op, Cut Cross-Entropy and Liger in turns, one process per group of shapes (its own
# JSON, so that a timeout keeps the groups before it), with call 2's floor. QuACK is not here: its packages (63 MiB
# packed) do not fit beside this tree (53 MiB) in a call's 64.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start $NAME
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl > $R/pip.log 2>&1 || echo "pip rc $?"
export PYTHONPATH=/tmp/site
for group in $SETS; do
  name=${group%%:*}; shapes=${group#*:}
  [ $((SECONDS-T0)) -gt ${STOP:-480} ] && { echo "not started: $name"; continue; }
  PYTHONUNBUFFERED=1 timeout $((${LIMIT:-585} - (SECONDS-T0))) python3 bench/peers.py --interleave --reps 15 --shapes $shapes \
    --impls peer_torch_eager,peer_torch_compile,stage10_plan_per_batch_op,peer_cce,peer_liger --lm-data /tmp/cce-lm-data \
    --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s64/bench.json --out $R/peers_$name.json > $R/peers_$name.txt 2>&1
  echo "peers $name rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_$name.txt | cut -c1-160
done
cd $OUT && tar czf $NAME.tgz $NAME && rm -rf $NAME
