#!/usr/bin/env bash
# Session 37, call 8: python/op_overhead_probe.py on the tree of 82e9be4 (the op's trims and the stages' host
# changes), gemma2 and lm32k's shape, one process.
T0=$SECONDS
R=$OUT/call8; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 200 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $?"
python3 - $R/op_overhead_probe.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for shape, s in d["shapes"].items():
    c, o = s["c_call"]["gpu_ms_median"], s["op_with_backward"]["gpu_ms_median"]
    q = s["queued"]; qa = q["ahead_alone"]["gpu_ms_median"]
    qc, qo = q["c_call"]["gpu_ms_median"] - qa, q["op_with_backward"]["gpu_ms_median"] - qa
    sp = s["split"]
    print("%s: C call %.3f ms, op with backward %.3f (%+.1f%%); queued %.3f against %.3f (%+.1f%%); split op prefix %.3f after %.3f host after %.3f" % (
        shape, c, o, 100 * (o / c - 1), qc, qo, 100 * (qo / qc - 1), sp["op_with_backward"]["prefix_ms"],
        sp["op_with_backward"]["after_call_ms"], sp["op_with_backward"]["host_after_call_ms"]))
PY
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call8.tgz call8
