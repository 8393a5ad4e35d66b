#!/usr/bin/env bash
# Session 41, call 3 (two H200): call 2 again after 00c4786 (the sample scratch kept stage 10's names; call 2 stopped at
# "scratch item never allocated"), memcheck without the CUDA API errors that NCCL's own probing reports: stage 10's and
# stage 11's tests; memcheck to the sample step on one GPU; gemma2_flat at P=2 and P=1, 40 timed steps; gemma2 at P=2.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "stage11|stage10|PlanPerBatch" -j4 --timeout 300 --output-on-failure) > $R/ctest_stage10_11.log 2>&1
echo "tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_stage10_11.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_stage10_11.log | head
S=/tmp/build/stages/stage11_sharded_vocabulary
$S --gpus 2 --check --backward --iters 0 --n 2300 --d 96 --v 5003 --data random --reduction none --upstream random > $R/sample_p2.txt 2>&1
echo "sample p2 rc $?"; grep -E "step 17|sample  |check  |replicas" $R/sample_p2.txt | cut -c1-260
timeout 200 compute-sanitizer --tool memcheck --report-api-errors no $S --gpus 1 --check --backward --iters 0 --n 2300 --d 96 --v 5003 --data random --reduction none --upstream random > $R/memcheck_sample_p1.txt 2>&1
echo "memcheck rc $? at $((SECONDS-T0)) s"; grep -E "ERROR SUMMARY|sample  " $R/memcheck_sample_p1.txt
G="--backward --n 8192 --d 2304 --v 256000 --dtype bf16"
for g in 2 1; do
  CCE_COMMIT=$(git rev-parse --short HEAD) timeout 120 $S $G --data random --gpus $g --iters 40 --json $R/flat_p$g.json > $R/flat_p$g.txt 2>&1
  echo "flat P=$g rc $?: $(grep -E '^  (time|memory)' $R/flat_p$g.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
CCE_COMMIT=$(git rev-parse --short HEAD) timeout 120 $S $G --data realistic --gpus 2 --iters 40 --json $R/gemma2_p2.json > $R/gemma2_p2.txt 2>&1
echo "gemma2 P=2 rc $?: $(grep -E '^  time' $R/gemma2_p2.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-300)"
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
