#!/usr/bin/env bash
# For a next session (written in session 59, not run), on the warm machine of next_suite.sh (its build in /tmp/build):
# what keeping the vocabulary order costs in a training, where C and the rows change every step: bench/train_compare.py
# on lm32k, the final stage (the order kept, sorted every 16th step) and the same seed with --sort-every 1, per step
# kept_frac and loss_ms side by side. The two runs of 500 steps took 48 s in all on an H200 (session 60).
T0=$SECONDS
R=$OUT/train; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
PYTHONUNBUFFERED=1 timeout 560 python3 bench/train_compare.py --dataset lm32k --runs final:1,final_sort_every_batch:1 \
  --steps 500 --eval-every 250 --cce-python /tmp/build/python --out $R/train_compare_lm32k_order.json \
  --figure $R/train_compare_lm32k_order.png > $R/train.txt 2>&1
echo "train rc $? at $((SECONDS-T0)) s"; tail -15 $R/train.txt
cd $OUT && tar czf train.tgz train
