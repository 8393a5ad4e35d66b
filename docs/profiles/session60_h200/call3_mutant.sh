#!/usr/bin/env bash
# Session 60, call 3 (warm machine of calls 1 and 2; run as CCE_COMMIT=<HEAD> bash <this>): next_train.sh (it stopped
# at once: train_compare's step estimate did not know the run kind final_sort_every_batch, mended in a7e9888), then
# the GPU mutant g10_next_batch_sorts_the_vocabulary, which did not build in call 2 (its `if (true)` left sort_every
# unused under -Werror; now `if (sort_every > 0)`), in call 2's mutant build folder.
CCE_COMMIT=$CCE_COMMIT bash docs/profiles/session59_h200/next_train.sh 2>&1 | tail -20
timeout 120 python3 scripts/mutants.py --gpu --build-dir /tmp/build-mut --only g10_next_batch_sorts_the_vocabulary \
  > $OUT/train/mutant.txt 2>&1
echo "mutant rc $?"; tail -3 $OUT/train/mutant.txt
cd $OUT && tar czf train.tgz train
