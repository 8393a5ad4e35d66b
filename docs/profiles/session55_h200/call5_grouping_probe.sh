#!/usr/bin/env bash
# Session 55, call 5 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): lm32k's and lm128k's models trained
# (bench/lm_data.py, one process each, side by side), then grouping_probe.py: the kept pairs under other orders of
# the rows than stage 10's, at the eps stage 10 chose in calls 2-3 and its neighbours. No build, nothing timed.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m > $R/lm_data_$m.log 2>&1
   echo "lm_data $m rc $? at $((SECONDS-T0)) s" > $R/lm_data_$m.rc) &
done
wait; cat $R/lm_data_*.rc
P=docs/profiles/session55_h200/grouping_probe.py
probe() { timeout $((585 - (SECONDS-T0))) python3 $P "$@" >> $R/probe.txt 2>&1 || echo "probe $2 failed"; }
probe /tmp/cce-lm-data/lm128k --label lm128k --log2-eps -12.5 -13 -14 --out $R/grouping_lm128k.json
probe /tmp/cce-lm-data/lm32k --label lm32k --log2-eps -9 -9.5 --out $R/grouping_lm32k.json
probe /tmp/cce-lm-data/lm128k_s300 --label lm128k_s300 --log2-eps -12.5 --out $R/grouping_lm128k_s300.json
probe /tmp/cce-lm-data/lm128k_s100 --label lm128k_s100 --log2-eps -15 --out $R/grouping_lm128k_s100.json
probe /tmp/cce-lm-data/lm128k_s30 --label lm128k_s30 --log2-eps -17 --out $R/grouping_lm128k_s30.json
grep -v Warning $R/probe.txt; echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call5.tgz call5
