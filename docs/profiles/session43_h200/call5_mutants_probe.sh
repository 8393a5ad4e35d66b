#!/usr/bin/env bash
# Session 43, call 5 (one H200): 7e00d4e + tests_mutants.patch (a reference case with 3001 tokens, more than the
# one-block reductions' 1024 threads; four GPU mutants of this session's code). The new cases and the sort's tests;
# the four mutants (scripts/mutants.py --gpu); then python/op_overhead_probe.py (the op against its C call at gemma2
# and lm32k's shapes, one process) on this tree.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
{ echo "tree: 7e00d4e + tests_mutants.patch"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call5.tgz call5; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "many_tokens|SortPairs" -j4 --timeout 200) > $R/ctest_new.log 2>&1
echo "new tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_new.log; grep -E "\(Failed\)|Timeout" $R/ctest_new.log | head
timeout 300 python3 scripts/mutants.py --gpu --only g_sort_padding_first --only g_sort_ties_unstable \
  --only g_token_losses_half_the_warps --only g08_merge_half_the_lanes --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -8 $R/mutants.txt
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 470 ]; then
  timeout $((560-(SECONDS-T0))) python3 python/op_overhead_probe.py /tmp/build/python $R/probe.json > $R/probe.txt 2>&1
  echo "probe rc $? at $((SECONDS-T0)) s"
  python3 docs/profiles/session38_h200/overhead_summary.py $R/probe.json 2>&1 | cut -c1-300
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call5.tgz call5
