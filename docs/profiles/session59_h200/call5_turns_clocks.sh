#!/usr/bin/env bash
# Session 59, call 5 (right after call 4 on the same warm machine: its build and inputs in /tmp): the op at gemma2
# alone and in turns with torch.compile again, nvidia-smi logging the SM clock and the power every 20 ms beside each;
# then op_overhead_probe.py in two more processes (its lm32k overhead moved between processes in earlier sessions).
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
for run in "op_alone stage10_plan_per_batch_op" "with_compile peer_torch_compile,stage10_plan_per_batch_op"; do
  set -- $run
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 20 > $R/clocks_$1.csv 2>&1 & SMI=$!
  PYTHONUNBUFFERED=1 timeout 60 python3 bench/peers.py --interleave --reps 20 --shapes gemma2 --impls $2 \
    --modes loss_grad --cce-python /tmp/build/python --out $R/peers_$1.json > $R/peers_$1.txt 2>&1
  echo "peers $1 rc $? at $((SECONDS-T0)) s: $(grep -E '^(stage10|peer)' $R/peers_$1.txt | grep -oE '^[a-z0-9_]+|[0-9.]+ ms' | paste -sd' ')"
  kill $SMI
done
for k in 2 3; do
  timeout 40 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe_$k.json > $R/probe_$k.txt 2>&1
  echo "probe $k rc $? at $((SECONDS-T0)) s"
done
cd $OUT && tar czf call5.tgz call5 && rm -rf call5
