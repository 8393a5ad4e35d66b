#!/usr/bin/env bash
# Session 42, call 4 (one H200): bench/train_compare.py on lm32k (issue 26, item 4's "lm32k too"): lm_data.py's
# lm32k model trained from scratch, 1200 steps, the seven runs (torch's two seeds first, then the final stage's two,
# the final stage without the tail correction, stage 07, cut-cross-entropy 25.1.1 from the carried wheel); the call's
# limit may cut the last runs (the JSON is rewritten after every run and evaluation).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
C=$(cat docs/profiles/session42_h200/commit.txt)
{ echo "tree: $C"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
export PYTHONUNBUFFERED=1 CCE_COMMIT=$C
timeout $((585 - (SECONDS - T0))) python3 bench/train_compare.py --dataset lm32k \
  --runs torch:1,torch:2,final:1,final:2,final_no_correction,stage07,cce --cce-python /tmp/build/python \
  --out $R/train_compare_lm32k.json --figure '' > $R/train.log 2>&1
echo "train rc $? at $((SECONDS-T0)) s"
grep -E "estimate|PASS|FAIL|SKIP|run .* done|held-out" $R/train.log | tail -30 | cut -c1-250
tail -25 $R/train.log | cut -c1-250
cd $OUT && tar czf call4.tgz call4
