#!/usr/bin/env bash
# Session 31, call 3: the head's test made to see a lost slab (DenseHeadOverSeveralSlabs against the run without a
# head) and the mutant that survived calls 1 and 2; then an A/B of unkept_side.patch (dC's unkept rows on the side
# stream after dE's products, beside dC's products; today after them on the main stream): the stage executable
# at gemma2, llama3 and gpt2's shapes (generator), 20 iterations, the trees alternating, three rounds.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
rm -rf /tmp/src-exp && mkdir /tmp/src-exp && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t /tmp/src-exp && (cd /tmp/src-exp && patch -p1 < $OLDPWD/docs/profiles/session31_h200/unkept_side.patch) > $R/patch.log 2>&1 || { echo "patch failed"; cat $R/patch.log; exit 1; }
(cmake -S /tmp/src-exp -B /tmp/build-exp -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-exp stage10_plan_per_batch test_stages_gpu) > $R/build_exp.log 2>&1 || { grep -B2 -A8 error $R/build_exp.log | head -40; exit 1; }
echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 120 ctest -R "PlanPerBatch.DenseHead" --timeout 100 > $R/ctest_head.log 2>&1); grep -E "tests passed|Failed" $R/ctest_head.log
(cd /tmp/build-exp && timeout 200 ctest -R "PlanPerBatch|DeterministicProducts|stage09|stage10" -j4 --timeout 150 > $R/ctest_exp.log 2>&1); grep -E "tests passed|\(Failed\)|Timeout" $R/ctest_exp.log | head
echo "tests $((SECONDS-T0)) s"
timeout 120 python3 scripts/mutants.py --gpu --only g10_head_de_overwritten --build-dir /tmp/mut --json $R/mutant.json > $R/mutant.txt 2>&1
echo "mutant rc $?: $(grep -E 'caught|SURVIVED' $R/mutant.txt | tail -1)"
for round in 1 2 3; do
  for dims in "--n 8192 --d 2304 --v 256000" "--n 8192 --d 4096 --v 128256" "--n 20480 --d 768 --v 50257"; do
    for tree in main exp; do
      B=/tmp/build; [ $tree = exp ] && B=/tmp/build-exp
      timeout 60 $B/stages/stage10_plan_per_batch $dims --backward --iters 20 > $R/t.txt 2>&1
      echo "round $round $tree [$dims]: $(grep -E 'time  |backward  ' $R/t.txt | tr '\n' ' ' | cut -c1-240)"
    done
  done
done
echo "total $((SECONDS-T0)) s"
