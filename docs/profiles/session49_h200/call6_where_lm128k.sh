#!/usr/bin/env bash
# Session 49, call 6 (one H200), main's HEAD: where stage 10's call goes at lm128k's trained data on a machine at its
# usual speed (session 47's lm128k trace ran on one 2.4x slow): bench/lm_data.py trains the model (nothing timed
# meanwhile), then a traced call through the C interface, then ncu --set full of one chunk's three kept-tile kernels
# there; the memory-bound passes at gemma2 under ncu (DRAM throughput of the sort key, the gather, the unkept rows).
T0=$SECONDS
R=$OUT/call6; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm128k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
LM=$!
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call6.tgz call6; exit 1; }
echo "build $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
[ -f /tmp/cce-inputs/gemma2/c.npy ] || /tmp/build/stages/stage01_materialized --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
wait $LM; cat $R/lm.rc; grep -E "held-out|^.*lm128k: softmax" $R/lm_data.log | tail -2
timeout 90 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-lm-data/lm128k --calls 5 --host --out $R/timeline_lm128k.txt > $R/timeline_lm128k.log 2>&1
echo "timeline rc $? ($((SECONDS-T0)) s)"; grep -E "^span|^==" $R/timeline_lm128k.txt; sed -n '/by name/,/^$/p' $R/timeline_lm128k.txt | head -12
timeout 150 ncu --set full -k regex:"recompute_kept|de_products|dc_products" -c 3 -o $R/ncu_lm128k $S10 --load /tmp/cce-lm-data/lm128k --backward --iters 0 > $R/ncu_lm128k.log 2>&1
echo "ncu lm128k rc $? ($((SECONDS-T0)) s)"
ncu --import $R/ncu_lm128k.ncu-rep --print-details all > $R/ncu_lm128k_full.txt 2>&1; rm -f $R/ncu_lm128k.ncu-rep
grep -E "^  [a-z_ ].*\(.*Context|    Duration  |Compute \(SM\) Throughput|Memory Throughput  |Stall (Barrier|Wait|Long Scoreboard|Math Pipe Throttle|Not Selected|Short Scoreboard)  " $R/ncu_lm128k_full.txt | cut -c1-110 | head -40
G2="--n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --backward --iters 0"
timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis -k regex:"sort_key_kernel|gather_rows_kernel|dc_unkept_rows" -c 3 $S10 $G2 > $R/ncu_gemma2_memory.txt 2>&1
echo "ncu gemma2 rc $? ($((SECONDS-T0)) s)"
grep -E "^  [a-z_ ].*\(.*Context|    Duration  |DRAM Throughput|Memory Throughput  " $R/ncu_gemma2_memory.txt | cut -c1-110
echo "total $((SECONDS-T0)) s"
gzip $R/ncu_lm128k_full.txt
cd $OUT && tar czf call6.tgz call6
