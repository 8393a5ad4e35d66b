#!/usr/bin/env bash
# Session 31, call 4: issue 25's two rows that no session had measured on today's code.
# (1) The kept-tile kernels on a dense kept set (random data: a flat softmax keeps every pair), gemma2's and llama3's
#     shapes, stage 10 with --plan sparse: each kernel's time under ncu (--clock-control none, one pass each, the
#     kernels serialized), summed over the call's chunks; TFLOP/s = 2·128·128·D·(kept pairs) per product / its time.
# (2) Stage 06 (the course's fused backward) at gemma2_flat: loss + gradient, the executable's median.
set -o pipefail
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S10=/tmp/build/stages/stage10_plan_per_batch
for s in "gemma2_flat 8192 2304 256000" "llama3_flat 8192 4096 128256"; do
  set -- $s
  timeout 60 $S10 --n $2 --d $3 --v $4 --data random --seed 1234 --backward --plan sparse --iters 3 > $R/stage10_$1.txt 2>&1
  echo "$1 stage 10 sparse rc $?: $(grep -E 'backward  |kept|time  ' $R/stage10_$1.txt | tr '\n' ' ' | cut -c1-300)"
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:"recompute_kept|dc_products|de_products|dc_unkept|lse_and_loss" \
    $S10 --n $2 --d $3 --v $4 --data random --seed 1234 --backward --plan sparse --iters 0 > $R/ncu_$1.txt 2>&1
  echo "$1 ncu rc $? ($((SECONDS-T0)) s)"
  python3 - $R/ncu_$1.txt <<'PY'
import re, sys, collections
tot = collections.OrderedDict(); name = None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s+(?:void )?(?:cce::)?\S*?(recompute_kept_kernel|dc_products_bf16|de_products_bf16|dc_unkept_rows|lse_and_loss_kernel)", line)
    if m: name = m.group(1); continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "ns" else v * 1000 if m.group(1) == "ms" else v
        c = tot.setdefault(name, [0, 0.0]); c[0] += 1; c[1] += v; name = None
for k, (n, us) in tot.items(): print("  %-22s %4d launches %10.1f us" % (k, n, us))
PY
done
S06=/tmp/build/stages/stage06_fused_backward
timeout 200 $S06 --n 8192 --d 2304 --v 256000 --data random --seed 1234 --backward --iters 3 > $R/stage06_gemma2_flat.txt 2>&1
echo "stage 06 gemma2_flat rc $?: $(grep -E 'time  ' $R/stage06_gemma2_flat.txt)"
echo "total $((SECONDS-T0)) s"
