#!/usr/bin/env bash
# Session 43, call 3 (one H200): 80ea102 + token_reduction.patch (the per-token reductions by warp shuffles instead
# of a tree in shared memory). Stages 01, 03, 10's GPU checks and the sort's test; a traced call at lm32k's shape on
# the generator (the two reductions' durations against call 2's); then ncu's duration, DRAM, L2, SM throughput and
# occupancy of the call's small kernels (stage 10's executable, same shape).
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/lm-gen
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "SortPairs|stage01|stage03|stage10|Reduction|Loss" -L "gpu|stage" -j4 --timeout 200) > $R/ctest_subset.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_subset.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_subset.log | head -20
/tmp/build/stages/stage01_materialized --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic \
  --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
timeout 40 python3 bench/stage_timeline.py /tmp/build/python /tmp/lm-gen/lm32k --calls 5 --out $R/timeline_lm32k_gen.txt > $R/timeline.log 2>&1
echo "timeline rc $? at $((SECONDS-T0)) s"; grep "^span" $R/timeline_lm32k_gen.txt; grep -E "reduce_token|token_grad_scale" $R/timeline_lm32k_gen.txt | tail -2
A="--n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --backward --iters 1"
K="regex:sort_key|gather_rows|dropped_mass|dc_unkept_rows|finish_de|reduce_token|token_grad|token_count|tail_mass|valid_row|lse_and_loss|target_coefficient|fill_block_lists|keep_at_exponent|one_block_sort|merge_chunk|sum_partials"
timeout 200 ncu --clock-control none -k "$K" -c 40 --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__block_size \
  /tmp/build/stages/stage10_plan_per_batch $A > $R/ncu_small.txt 2>&1
echo "ncu rc $? at $((SECONDS-T0)) s"
python3 - $R/ncu_small.txt <<'PY' | tee $R/ncu_small_table.txt
import re, sys
rows, name = {}, None
for line in open(sys.argv[1]):
    m = re.match(r"\s+(?:void )?([\w:<>, ]+?)(?:<.*)?\(.*\) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m: name = m.group(1).split("::")[-1]; continue
    m = re.match(r"\s+(\S+)\s+(\S+)\s+([\d.,]+)\s*$", line)
    if m and name and name not in rows or (m and name and m.group(1) not in rows.get(name, {})):
        rows.setdefault(name, {})[m.group(1)] = m.group(3)
for name, r in rows.items():
    print(f"{name:32s} " + "  ".join(f"{k.split('__')[1].split('.')[0]}={v}" for k, v in r.items()))
PY
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
