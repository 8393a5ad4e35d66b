#!/usr/bin/env bash
# Session 36, call 4 (issue 26's overhead at lm32k's shape, on call 1's tree): the inputs of gemma2 and of lm32k's
# shape (the realistic generator, as python/op_overhead_probe.py reads them); the probe (C call, op, frozen
# classifier, and queued behind 0.5 ms of GPU work); bench/stage_timeline.py with the host's calls at lm32k's shape,
# through the C interface and through the op: where the op's time before the stage's first kernel goes.
set -o pipefail
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
if [ ! -x /tmp/build/stages/stage01_materialized ]; then
  (cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
fi
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
$S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 --save /tmp/lm-gen/lm32k --save-large \
  --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs rc $? at $((SECONDS-T0)) s"
timeout 200 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"
python3 - $R/op_overhead_probe.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for s, r in j["shapes"].items():
    c, o, q = r["c_call"]["gpu_ms_median"], r["op_with_backward"]["gpu_ms_median"], r["queued"]
    qc = q["c_call"]["gpu_ms_median"] - q["ahead_alone"]["gpu_ms_median"]
    qo = q["op_with_backward"]["gpu_ms_median"] - q["ahead_alone"]["gpu_ms_median"]
    print("%-12s c_call %.3f op %.3f (%+.1f%%)  queued: c_call %.3f op %.3f (%+.1f%%)"
          % (s, c, o, 100 * (o / c - 1), qc, qo, 100 * (qo / qc - 1)))
PY
for through in c op; do
  extra=""; [ $through = op ] && extra="--through op"
  timeout 60 python3 bench/stage_timeline.py /tmp/build/python /tmp/lm-gen/lm32k --host $extra \
    --out $R/timeline_${through}_lm32k.txt > $R/timeline_${through}_lm32k.log 2>&1
  echo "lm32k through $through: $(grep -E '^span' $R/timeline_${through}_lm32k.txt | head -1)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
