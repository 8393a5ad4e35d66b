#!/usr/bin/env bash
# Session 23, call 7 (branch wip/keep-store-hint): the kept tiles' lean stores (CCE_EXP_KEEP_STORE=3) against
# today's (0) at gemma2_flat: ncu of the forward that keeps them, stage 10's dense check on two odd shapes, cce_bench.
set -o pipefail
T0=$SECONDS
R=$OUT/c7; mkdir -p $R
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null && ninja -C /tmp/build stage10_plan_per_batch cce_bench) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
ARGS="--n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 --iters 0 --backward --plan dense"
for mode in 3 0; do
  CCE_EXP_KEEP_STORE=$mode timeout 40 ncu --clock-control none --section SpeedOfLight --section InstructionStats -k regex:wgmma_pipeline_kernel -c 1 $S10 $ARGS > $R/ncu_keep_mode$mode.txt 2>&1
  echo "ncu mode $mode: $(grep -E '^ +Duration|SM Frequency|Executed Instructions  ' $R/ncu_keep_mode$mode.txt | awk '{print $NF}' | tr '\n' ' ') ($((SECONDS-T0)) s)"
done
CCE_EXP_KEEP_STORE=3 timeout 30 $S10 --n 1100 --d 192 --v 30011 --dtype bf16 --softcap 30 --ignore-frac 0.05 --backward --plan dense --check --iters 0 > $R/check_1100.txt 2>&1; echo "check 1100 rc $? $(grep -E 'check +' $R/check_1100.txt | head -1)"
CCE_EXP_KEEP_STORE=3 timeout 20 $S10 --n 77 --d 100 --v 1129 --dtype bf16 --backward --plan dense --check --iters 0 > $R/check_77.txt 2>&1; echo "check 77 rc $? $(grep -E 'check +' $R/check_77.txt | head -1)"
for mode in 0 3; do
  f=$R/ab_mode$mode
  CCE_EXP_KEEP_STORE=$mode timeout 40 /tmp/build/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "ab mode $mode: $(python3 -c "import json;d=json.load(open('$f.json'));print(' '.join('%s %.3f'%(b['name'].split('/')[0][:6]+'_'+b['aggregate_name'],b['real_time']) for b in d['benchmarks'] if b.get('aggregate_name') in ('median','min','max')))" 2>/dev/null) ($((SECONDS-T0)) s)"
done
(cd $OUT && tar -czf c7.tgz c7 && rm -r c7)
echo "total $((SECONDS-T0)) s"
