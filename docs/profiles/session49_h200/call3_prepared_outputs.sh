#!/usr/bin/env bash
# Session 49, call 3 (one H200), main's HEAD: the op's overhead (issue 26). prepared_ab.py (outputs made for the
# next call after the C call, an experiment outside the package) in turns with the package's op and the C call, two
# processes; then python/op_overhead_probe.py once, as sessions 43-46 ran it.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; python3 -c "import torch; print(torch.__version__)"; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call3.tgz call3; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "saved $((SECONDS-T0)) s"
for i in 1 2; do
  timeout 150 python3 docs/profiles/session49_h200/prepared_ab.py /tmp/build/python $R/prepared_ab_$i.json 200 > $R/prepared_ab_$i.txt 2>&1
  echo "prepared_ab $i rc $? ($((SECONDS-T0)) s)"; cat $R/prepared_ab_$i.txt | tail -6
done
timeout 150 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? ($((SECONDS-T0)) s)"; tail -12 $R/probe.txt
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
