#!/usr/bin/env bash
# Session 36, call 6 (a fresh H200; main after call 5, whose CUDA and C++ are 856ed84's): python/op_overhead_probe.py
# with its new "split" pass, the C call marked by two events inside the op: how much of the op's overhead at lm32k's
# shape is the host's time before the stage, and how much its time after the C call returns.
set -o pipefail
T0=$SECONDS
R=$OUT/call6; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
$S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 --save /tmp/cce-inputs/gemma2 \
  --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 --save /tmp/lm-gen/lm32k --save-large \
  --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
timeout 150 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; tail -3 $R/probe.txt | cut -c1-300
python3 - $R/op_overhead_probe.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for s, r in j["shapes"].items():
    c, o = r["c_call"]["gpu_ms_median"], r["op_with_backward"]["gpu_ms_median"]
    print("%-8s c_call %.3f op %.3f (%+.1f%%)" % (s, c, o, 100 * (o / c - 1)))
    for k, v in r["split"].items():
        print("   %-17s " % k + " ".join("%s %.3f" % (n, x) for n, x in v.items()))
PY
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call6.tgz call6
