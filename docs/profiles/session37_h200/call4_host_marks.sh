#!/usr/bin/env bash
# Session 37, call 4: host_marks.patch applied to the device's copy, built apart (/tmp/build-marks), the host's spans
# inside cce_run at lm32k's and gemma2's shapes (marks_driver.py, marks_summary.py).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
git apply docs/profiles/session37_h200/host_marks.patch || { echo "patch failed"; exit 1; }
(cmake -S . -B /tmp/build-marks -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-marks stage01_materialized cce_capi) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; git apply -R docs/profiles/session37_h200/host_marks.patch; exit 1; }
git apply -R docs/profiles/session37_h200/host_marks.patch
echo "build $((SECONDS-T0)) s"
S1=/tmp/build-marks/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 120 python3 docs/profiles/session37_h200/marks_driver.py /tmp/build-marks/python 2> $R/marks.log > $R/driver.txt
echo "driver rc $?"; grep -v "^MARKS\|^CASE" $R/marks.log | head -5
python3 docs/profiles/session37_h200/marks_summary.py $R/marks.log $R/marks.json
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
