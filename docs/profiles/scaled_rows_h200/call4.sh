#!/usr/bin/env bash
# Session 26, call 4: the bf16 dense chunks keep q = exp(z − R_i)·softcap' (the target logit as R_i): build; the
# old tree (73671eb, fp16 logits and the S pass) built beside; stage 10's dense check at six shapes; the A/B at
# gemma2_flat (cce_bench, the trees alternating, the floor in each process); then the whole GPU suite.
set -o pipefail
T0=$SECONDS
R=$OUT/c4; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; tar czf $OUT/c4.tgz -C $OUT c4; exit 1; }
echo "build $((SECONDS-T0)) s"
rm -rf /tmp/old && mkdir -p /tmp/old && tar xzf .device-deps/s26/old.tgz -C /tmp/old
(cmake -S /tmp/old -B /tmp/build_old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build_old bench/cce_bench) > $R/build_old.log 2>&1 &
BO=$!
S=/tmp/build/stages/stage10_plan_per_batch
i=0
while read -r args; do
  i=$((i+1))
  timeout 120 $S --check --backward --plan dense --iters 2 $args > $R/check_$i.txt 2>&1
  echo "check $i rc $? | $args | $(grep -iE 'check +(PASSED|FAILED)' $R/check_$i.txt | head -1) | $(grep -oE '^ *[a-zA-Z]+ +(ok|FAIL) .*worst [0-9.]+' $R/check_$i.txt | sed -E 's/ +max abs err ([^ ]+).*rel L2 err ([^ ]+).*worst/ \1 L2 \2 worst/' | tr -s ' ' | tr '\n' ';')"
done <<'ARGS'
--n 77 --d 100 --v 1129 --dtype bf16 --softcap 30 --ignore-frac 0.1
--n 77 --d 128 --v 1129 --dtype bf16 --dense-chunk-rows 30
--n 1100 --d 192 --v 30011 --dtype bf16
--n 1100 --d 192 --v 30011 --dtype bf16 --reduction none --softcap 30 --ignore-frac 0.2
--n 300 --d 128 --v 16411 --dtype bf16 --reduction sum --dense-chunk-rows 128
--n 2000 --d 256 --v 50000 --dtype bf16 --data random
ARGS
echo "checks $((SECONDS-T0)) s"
wait $BO || { tail -20 $R/build_old.log; }
echo "build old $((SECONDS-T0)) s"
for round in 1 2; do for tree in old new; do
  B=/tmp/build; [ $tree = old ] && B=/tmp/build_old
  f=$R/ab_${tree}_r$round
  timeout 100 $B/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "r$round $tree: $(python3 -c "
import json;d=json.load(open('$f.json'))
m={}
for b in d['benchmarks']:
  if b.get('aggregate_name') in ('median','min','max'): m.setdefault(b['run_name'].split('/iter')[0],{})[b['aggregate_name']]=b['real_time']
for k,v in sorted(m.items()): print('%s %.3f (%.3f-%.3f)'%(k,v['median'],v['min'],v['max']),end='; ')
" 2>&1) ($((SECONDS-T0)) s)"
done; done
(cd /tmp/build && timeout $((590 - (SECONDS - T0))) ctest -L "gpu|stage" -j4 --timeout 240 > $R/ctest_gpu.log 2>&1)
echo "suite rc $? $(grep -E 'tests passed|tests failed' $R/ctest_gpu.log) ($((SECONDS-T0)) s)"
grep -E "\(Failed\)|\(Timeout\)|\*\*\*" $R/ctest_gpu.log | head -20
echo "total $((SECONDS-T0)) s"
tar czf $OUT/c4.tgz -C $OUT c4
