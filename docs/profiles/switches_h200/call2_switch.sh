#!/usr/bin/env bash
set -o pipefail
T0=$SECONDS
R=$OUT/c2; mkdir -p $R
S10=/tmp/build/stages/stage10_plan_per_batch
ls $S10 /tmp/build/bench/cce_bench > /dev/null || exit 1
(cd /tmp/build && CCE_EXP_DE_ROWS_BY_TMA=1 CCE_EXP_DC_ROWS_IN_ORDER=1 CCE_EXP_PREFIX_GRAPH=1 CCE_EXP_PRODUCTS_ORDER=serial_dc timeout 230 ctest -L "gpu|stage" -R "stage0[89]|stage1[01]|DropBeforeRecompute|DeterministicProducts|PlanPerBatch|LaterStages" -j4 --timeout 150 > $R/ctest_switch_on.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout" $R/ctest_switch_on.log | head
echo "tests (switch on) $((SECONDS-T0)) s"
for tool in memcheck racecheck; do
  CCE_EXP_DE_ROWS_BY_TMA=1 CCE_EXP_DC_ROWS_IN_ORDER=1 CCE_EXP_PREFIX_GRAPH=1 timeout 90 compute-sanitizer --tool $tool $S10 --n 1100 --d 192 --v 30011 --dtype bf16 --softcap 30 --ignore-frac 0.05 --backward --check --iters 0 --plan sparse > $R/sanitizer_$tool.txt 2>&1
  echo "sanitizer $tool rc $? $(grep -E 'check +(PASSED|FAILED)' $R/sanitizer_$tool.txt) $(tail -1 $R/sanitizer_$tool.txt)"
done
for m in 0 1; do
  CCE_EXP_DE_ROWS_BY_TMA=$m CCE_EXP_DC_ROWS_IN_ORDER=$m timeout 60 ncu --clock-control none -k regex:"de_products_bf16|dc_products_bf16" -c 2 $S10 --load /tmp/cce-lm-data/lm32k --backward --iters 0 --plan sparse > $R/ncu_lm32k_switch$m.txt 2>&1
  echo "ncu switch $m: $(grep -E 'Duration' $R/ncu_lm32k_switch$m.txt | awk '{print $NF}' | tr '\n' ' ') us (dE first, then dC: see the file)"
done
CONFIGS=(base:none de:CCE_EXP_DE_ROWS_BY_TMA=1 dc:CCE_EXP_DC_ROWS_IN_ORDER=1 dedc:CCE_EXP_DE_ROWS_BY_TMA=1,CCE_EXP_DC_ROWS_IN_ORDER=1 graph:CCE_EXP_PREFIX_GRAPH=1 serial_de:CCE_EXP_PRODUCTS_ORDER=serial_de serial_dc:CCE_EXP_PRODUCTS_ORDER=serial_dc)
for round in 1 2 3; do for shape in lm32k gpt2; do for cfg in "${CONFIGS[@]}"; do
  [ $((SECONDS-T0)) -gt 530 ] && break 3
  name=${cfg%%:*}; vars=${cfg#*:}; [ "$vars" = none ] && vars=""
  f=$R/ab_${shape}_${name}_r$round
  env ${vars//,/ } timeout 40 /tmp/build/bench/cce_bench --shapes=$shape --lm-data=/tmp/cce-lm-data --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "$round $shape $name: $(python3 -c "import json;d=json.load(open('$f.json'));print(' '.join('%s %.4f'%(b['name'].split('/')[0][:6]+'_'+b['aggregate_name'],b['real_time']) for b in d['benchmarks'] if b.get('aggregate_name') in ('median','min','max')))" 2>/dev/null) ($((SECONDS-T0)) s)"
done; done; done
(cd $OUT && tar -czf c2.tgz c2 && rm -r c2)
echo "total $((SECONDS-T0)) s"
