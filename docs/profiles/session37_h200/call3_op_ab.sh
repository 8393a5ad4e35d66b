#!/usr/bin/env bash
# Session 37, call 3: the op's tests on the trimmed host path, then op_ab_probe.py (A: session 36's package, B: the
# trimmed one) and host_after_wait.py's spans of B.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt; git diff > $R/diff.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
# cce_stages_s36/ (op_ab_probe.py's "A"): committed when this call ran, made by make_package_s36.sh since (the same bytes)
[ -f docs/profiles/session37_h200/cce_stages_s36/__init__.py ] || bash docs/profiles/session37_h200/make_package_s36.sh
timeout 120 python3 docs/profiles/session37_h200/op_ab_probe.py /tmp/build/python $R/op_ab.json > $R/op_ab.txt 2>&1
echo "ab rc $?"; cut -c1-700 $R/op_ab.txt
timeout 60 python3 docs/profiles/session37_h200/host_after_wait.py /tmp/build/python $R/host_B.json auto > $R/host_B.txt 2>&1
echo "spans rc $?"; grep -v W_ $R/host_B.txt | cut -c1-400
(cd /tmp/build && timeout 300 ctest -R "^pytorch\.op\." --output-on-failure) > $R/ctest_op.log 2>&1
echo "ctest rc $?"; tail -15 $R/ctest_op.log
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
