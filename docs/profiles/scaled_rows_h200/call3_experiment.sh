#!/usr/bin/env bash
# Session 26, call 3: the scaled keep (CCE_EXP_SCALED_KEEP): stage 10's dense check at several shapes with the switch
# 0, 1, 2 (2: every chunk run again with R = LSE); stage 10's gtests with it on; the A/B at gemma2_flat (2 rounds).
set -o pipefail
T0=$SECONDS
R=$OUT/c3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c3.tgz -C $OUT c3; exit 1; }
echo "build $((SECONDS-T0)) s"
S=/tmp/build/stages/stage10_plan_per_batch
i=0
while read -r args; do
  i=$((i+1))
  for sw in 0 1 2; do
    CCE_EXP_SCALED_KEEP=$sw timeout 120 $S --check --backward --plan dense --iters 2 $args > $R/check_${i}_sw$sw.txt 2>&1
    echo "check $i sw $sw rc $? | $args | $(grep -iE 'check +(PASSED|FAILED)' $R/check_${i}_sw$sw.txt | head -1) | $(grep -oE '^ *[a-zA-Z]+ +(ok|FAIL) .*worst [0-9.]+' $R/check_${i}_sw$sw.txt | sed -E 's/ +max abs.*worst/ worst/' | tr -s ' ' | tr '\n' ';')"
  done
done <<'ARGS'
--n 77 --d 100 --v 1129 --dtype bf16 --softcap 30 --ignore-frac 0.1
--n 77 --d 128 --v 1129 --dtype bf16 --dense-chunk-rows 30
--n 1100 --d 192 --v 30011 --dtype bf16
--n 1100 --d 192 --v 30011 --dtype bf16 --reduction none --softcap 30 --ignore-frac 0.2
--n 300 --d 128 --v 16411 --dtype bf16 --reduction sum --dense-chunk-rows 128
--n 2000 --d 256 --v 50000 --dtype bf16 --data random
ARGS
echo "checks $((SECONDS-T0)) s"
(cd /tmp/build && CCE_EXP_SCALED_KEEP=1 timeout 200 ./tests/gpu/test_stages_gpu --gtest_filter='PlanPerBatch.*:*stage10*' > $R/gtest_sw1.log 2>&1)
echo "gtest sw1 rc $? $(grep -E '^\[  PASSED|^\[  FAILED' $R/gtest_sw1.log | tr '\n' ' ') $((SECONDS-T0)) s"
for round in 1 2; do for sw in 0 1; do
  f=$R/ab_sw${sw}_r$round
  CCE_EXP_SCALED_KEEP=$sw timeout 150 /tmp/build/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "r$round sw $sw: $(python3 -c "
import json;d=json.load(open('$f.json'))
m={}
for b in d['benchmarks']:
  if b.get('aggregate_name') in ('median','min','max'): m.setdefault(b['run_name'].split('/iter')[0],{})[b['aggregate_name']]=b['real_time']
for k,v in sorted(m.items()): print('%s %.3f (%.3f-%.3f)'%(k,v['median'],v['min'],v['max']),end='; ')
" 2>&1) $(grep -m1 -i 'peak' $f.txt | cut -c1-80) ($((SECONDS-T0)) s)"
done; done
echo "total $((SECONDS-T0)) s"
tar czf $OUT/c3.tgz -C $OUT c3
