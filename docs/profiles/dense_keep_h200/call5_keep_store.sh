#!/usr/bin/env bash
# Session 23, call 5 (branch wip/keep-store-hint): the dense plan's kept tiles at gemma2_flat with plain stores (0),
# streaming stores st.global.cs (1) or none (2, timing only: S is then wrong). Traced calls alternate the modes;
# then cce_bench A/B of 0 and 1 with the floor; then stage 10's tests with mode 1.
set -o pipefail
T0=$SECONDS
R=$OUT/c5; mkdir -p $R
nvidia-smi -L > $R/gpu.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
/tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data random --seed 1234 --save /tmp/in/gemma2_flat --save-large --iters 0 > $R/save.log 2>&1
echo "inputs rc $? $((SECONDS-T0)) s"
for round in 1 2; do for mode in 0 1 2; do
  f=$R/timeline_mode${mode}_r$round.txt
  CCE_EXP_KEEP_STORE=$mode timeout 60 python3 bench/stage_timeline.py /tmp/build/python /tmp/in/gemma2_flat --calls 4 --out $f > /dev/null 2>&1
  echo "trace r$round mode $mode: $(grep -E 'wgmma_pipeline_kernel|chunk_gradient|nvjet' $f | grep -E '^ +1 ' | awk '{printf "%s ", $2}') span $(grep '^span' $f | awk '{print $2}') ($((SECONDS-T0)) s)"
done; done
for round in 1 2; do for mode in 0 1; do
  f=$R/ab_mode${mode}_r$round
  CCE_EXP_KEEP_STORE=$mode timeout 60 /tmp/build/bench/cce_bench --shapes=gemma2_flat --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$f.json --benchmark_out_format=json > $f.txt 2>&1
  echo "ab r$round mode $mode: $(python3 -c "import json;d=json.load(open('$f.json'));print(' '.join('%s %.3f'%(b['name'].split('/')[0][:6]+'_'+b['aggregate_name'],b['real_time']) for b in d['benchmarks'] if b.get('aggregate_name') in ('median','min','max')))" 2>/dev/null) ($((SECONDS-T0)) s)"
done; done
(cd /tmp/build && CCE_EXP_KEEP_STORE=1 timeout $((560 - (SECONDS - T0))) ctest -L "gpu|stage" -R "stage10|PlanPerBatch" -j4 --timeout 150 > $R/ctest_mode1.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout" $R/ctest_mode1.log | head
(cd $OUT && tar -czf c5.tgz c5 && rm -r c5)
echo "total $((SECONDS-T0)) s"
