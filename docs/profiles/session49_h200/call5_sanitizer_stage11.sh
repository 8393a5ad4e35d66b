#!/usr/bin/env bash
# Session 49, call 5 (one H200), main's c8fef5f (stage 11's allocations before its collectives): compute-sanitizer
# memcheck of stage 11 at P=1 on the command lines its one-GPU tests run: the dense plan through step 17's sample
# (random data), the sample of 1024 rows with a per-token upstream, and the sparse plan on realistic data.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage11_sharded_vocabulary) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call5.tgz call5; exit 1; }
echo "build $((SECONDS-T0)) s"
S11=/tmp/build/stages/stage11_sharded_vocabulary
BASE="--check --backward --iters 0 --compare-single --gpus 1"
i=0
for args in "--n 300 --d 200 --v 20001 --data random" \
            "--n 2300 --d 96 --v 5003 --data random --reduction none --upstream random" \
            "--n 300 --d 200 --v 20001 --data realistic --softcap 30"; do
  i=$((i+1))
  timeout 170 compute-sanitizer --tool memcheck --report-api-errors no $S11 $BASE $args > $R/memcheck_$i.txt 2>&1
  echo "memcheck $i rc $? ($((SECONDS-T0)) s): $args"; grep -E "ERROR SUMMARY|check +(PASSED|FAILED)|backward " $R/memcheck_$i.txt | head -4
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call5.tgz call5
