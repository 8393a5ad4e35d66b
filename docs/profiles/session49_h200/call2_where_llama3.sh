#!/usr/bin/env bash
# Session 49, call 2 (one H200), main's HEAD: where stage 10's call goes at llama3 and gemma2 (generated data, the
# shapes over their issue-25 targets) on a machine that runs at its usual speed: a traced call through the C
# interface (bench/stage_timeline.py --host), then ncu (--set full, one launch each) of the kept-tile kernels at
# llama3 (the recomputation, dE's and dC's owners), and ncu's durations of every kernel of one call at llama3.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
S10=/tmp/build/stages/stage10_plan_per_batch
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/llama3 --save-large --iters 0 > $R/save_llama3.log 2>&1
echo "saved $((SECONDS-T0)) s"
for s in llama3 gemma2; do
  timeout 90 python3 bench/stage_timeline.py /tmp/build/python /tmp/cce-inputs/$s --calls 5 --host --out $R/timeline_$s.txt > $R/timeline_$s.log 2>&1
  echo "timeline $s rc $?"; grep -E "^span|^==" $R/timeline_$s.txt; sed -n '/by name/,/^$/p' $R/timeline_$s.txt | head -14
done
L3="--n 8192 --d 4096 --v 128256 --dtype bf16 --data realistic --seed 1234 --backward --iters 0"
timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum $S10 $L3 > $R/ncu_llama3_all.txt 2>&1
echo "ncu all rc $? ($((SECONDS-T0)) s)"
python3 - $R/ncu_llama3_all.txt <<'PY'
import re, sys, collections
tot = collections.OrderedDict(); name = None
for line in open(sys.argv[1]):
    m = re.match(r"\s{2}(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m: name = re.sub(r"\(.*", "", m.group(1)).split("<")[0].split("::")[-1]; continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "ns" else (v * 1000 if m.group(1) == "ms" else v)
        tot[name] = tot.get(name, 0) + v; name = None
for k, v in sorted(tot.items(), key=lambda kv: -kv[1])[:16]: print("  %8.1f us  %s" % (v, k))
PY
timeout 200 ncu --set full -k regex:"recompute_kept|de_products|dc_products" -c 3 -o $R/ncu_llama3_full $S10 $L3 > $R/ncu_llama3_full.log 2>&1
echo "ncu full rc $? ($((SECONDS-T0)) s)"
ncu --import $R/ncu_llama3_full.ncu-rep --print-details all > $R/ncu_llama3_full.txt 2>&1
grep -E "^  [a-z_].*\(|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued" $R/ncu_llama3_full.txt | head -60
rm -f $R/ncu_llama3_full.ncu-rep
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
