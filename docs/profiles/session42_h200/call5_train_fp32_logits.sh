#!/usr/bin/env bash
# Session 42, call 5 (one H200): bench/train_compare.py on lm32k, the two seeds of torch_fp32_logits (PyTorch's loss
# on fp32 logits), merged into call 4's JSON (the same settings): whether the final stage's lower held-out loss
# comes from its fp32 logits. No build: these runs do not use cce_stages.
T0=$SECONDS
R=$OUT/call5; mkdir -p $R
C=$(cat docs/profiles/session42_h200/commit.txt)
{ echo "tree: $C"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
cp docs/train/train_compare_lm32k_b3a3ff6.json $R/train_compare_lm32k.json
export PYTHONUNBUFFERED=1 CCE_COMMIT=$C
timeout 270 python3 bench/train_compare.py --dataset lm32k --runs torch_fp32_logits:1,torch_fp32_logits:2 --merge \
  --out $R/train_compare_lm32k.json --figure '' > $R/train.log 2>&1
echo "train rc $? at $((SECONDS-T0)) s"
tail -22 $R/train.log | cut -c1-250
cd $OUT && tar czf call5.tgz call5
