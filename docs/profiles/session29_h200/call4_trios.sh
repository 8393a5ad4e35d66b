#!/usr/bin/env bash
# Session 29, call 4 (the same warm machine as calls 1-3, its builds, data and wheels): bench/peers.py
# --interleave at lm128k_s100 (every implementation), then stage 10's op, QuACK and torch.compile alone in turns
# at lm128k_s0 and gemma2_flat, in one order and in the reverse order (a, b). At this tree time_in_turns kept the
# order given in every round (the reversal every other round came after this session's calls).
T0=$SECONDS; export PYTHONPATH=/tmp/site:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages; R=$OUT/c4; mkdir -p $R; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
run() { # name shape impls reps
 PYTHONUNBUFFERED=1 timeout $((590 - (SECONDS - T0))) python3 bench/peers.py --interleave --reps $4 --shapes $2 --impls $3 --lm-data /tmp/cce-lm-data --modes loss_grad --cce-python /tmp/build/python --floor-json /tmp/s29/bench.json --out $R/$1.json > $R/$1.txt 2>&1; echo "$1 rc $? at $((SECONDS-T0)) s"; grep " ms " $R/$1.txt | cut -c1-75; }
run peers_lm128k_s100 lm128k_s100 peer_torch_eager,peer_torch_compile,peer_cce,peer_cce_nofilter,peer_liger,stage10_plan_per_batch_op,peer_quack 20
run trio_lm128k_s0_a lm128k_s0 peer_torch_compile,stage10_plan_per_batch_op,peer_quack 30
run trio_lm128k_s0_b lm128k_s0 peer_quack,stage10_plan_per_batch_op,peer_torch_compile 30
[ $((SECONDS-T0)) -lt 420 ] && run trio_gemma2_flat_a gemma2_flat peer_torch_compile,stage10_plan_per_batch_op,peer_quack 20
[ $((SECONDS-T0)) -lt 500 ] && run trio_gemma2_flat_b gemma2_flat peer_quack,stage10_plan_per_batch_op,peer_torch_compile 20
tar czf $OUT/c4.tgz -C $OUT c4 && rm -r $R; echo "total $((SECONDS-T0)) s"
