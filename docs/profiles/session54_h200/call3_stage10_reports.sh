#!/usr/bin/env bash
# Session 54, call 3 (right after call 2 on the same warm machine; carry [".quack-wheels/xz4.02"], QuACK's third part;
# run as CCE_COMMIT=<HEAD> bash <this>): stage 10's report lines at lm32k and lm128k's five snapshots of call 1's
# training (which plan and eps the automatic rule chose, and the candidates' misplaced mass behind it).
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/q
cp .quack-wheels/xz4.02 /tmp/q/ && echo "carried $(du -h /tmp/q/xz4.02 | cut -f1)"
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for s in lm32k lm128k_s0 lm128k_s30 lm128k_s100 lm128k_s300 lm128k; do
  [ $((SECONDS-T0)) -gt 540 ] && break
  timeout 20 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 5 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'plan|drop   |candidates' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
