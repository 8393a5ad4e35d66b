#!/usr/bin/env bash
# Session 60, call 6 (warm machine; call 4 trained seed 1234): two more seeds of lm32k's training with the vocabulary
# order kept (sorted every 16th step) and sorted every step, 500 steps each, to see whether call 4's difference in
# the loss part's time is the order's or one trajectory's plan choices.
R=$OUT/train2; mkdir -p $R
PYTHONUNBUFFERED=1 timeout 280 python3 bench/train_compare.py --dataset lm32k --seeds 1234,5678,4321 \
  --runs final:2,final_sort_every_batch:2,final:3,final_sort_every_batch:3 --steps 500 --eval-every 250 \
  --cce-python /tmp/build/python --out $R/train_compare_lm32k_order_seeds23.json > $R/train.txt 2>&1
echo "rc $?"; tail -14 $R/train.txt
