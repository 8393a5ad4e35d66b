#!/usr/bin/env bash
# Session 54, call 3 (right after call 2 on the same warm machine; carry [".quack-wheels/xz4.02"], QuACK's third part;
# run as CCE_COMMIT=<HEAD> bash <this>): stage 10's report lines at lm32k and lm128k's five snapshots of call 1's
# training (which plan and eps the automatic rule chose, and the candidates' misplaced mass behind it); first the
# GPU suite's tests that call 1 did not finish.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/q
cp .quack-wheels/xz4.02 /tmp/q/ && echo "carried $(du -h /tmp/q/xz4.02 | cut -f1)"
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
# The GPU suite's tests that call 1 did not finish (its ctest ran out of its 330 s beside the two trainings):
# every test of ctest -L "gpu|stage" not named in call1_finished.txt.
(cd /tmp/build && ctest -N -L "gpu|stage") | sed -n 's/^ *Test *#[0-9]*: //p' > $R/suite_all.txt
python3 - $R/suite_all.txt docs/profiles/session54_h200/call1_finished.txt > $R/suite_rest.regex <<'P'
import re, sys
finished = set(open(sys.argv[2]).read().split())
rest = [t for t in open(sys.argv[1]).read().split() if t not in finished]
print("^(" + "|".join(re.escape(t) for t in rest) + ")$")
P
echo "suite: $(wc -l < $R/suite_all.txt) tests, $(wc -l < docs/profiles/session54_h200/call1_finished.txt) finished in call 1"
(cd /tmp/build && timeout 300 ctest -L "gpu|stage" -R "$(cat $R/suite_rest.regex)" -j4 --timeout 250) > $R/ctest_rest.log 2>&1
echo "rest of the suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_rest.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_rest.log | head -20
for s in lm32k lm128k_s0 lm128k_s30 lm128k_s100 lm128k_s300 lm128k; do
  [ $((SECONDS-T0)) -gt 540 ] && break
  timeout 20 /tmp/build/stages/stage10_plan_per_batch --load /tmp/cce-lm-data/$s --backward --iters 5 > $R/exec_$s.txt 2>&1
  echo "$s: $(grep -E 'plan|drop   |candidates' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
