#!/usr/bin/env bash
# For a next session (written in session 59, not run), right after next_suite.sh on the same warm machine (its builds
# and training in /tmp): cce_bench's stage 10 (loss + grad) of main's tree and the branch in turns, three rounds, at
# lm128k, lm32k, gpt2, llama3, gemma2, the floor in round 1 (about 280 s; cce_bench's warm-up calls are earlier
# batches of the same inputs, so the branch's timed calls keep the order: the time of one pass over C, not what a
# kept order costs in a training, which next_train.sh measures); then the GPU mutants of the order.
T0=$SECONDS
R=$OUT/ab; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
stage10_rounds 3 lm128k,lm32k,gpt2,llama3,gemma2 main=/tmp/build-main next=/tmp/build
cd $OUT && tar czf ab.tgz ab && cd - > /dev/null
timeout $((580 - (SECONDS-T0))) python3 scripts/mutants.py --gpu --build-dir /tmp/build-mut \
  --only g10_next_batch_sorts_the_vocabulary --only g08_sort_key_ascending > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -5 $R/mutants.txt
cd $OUT && tar czf ab.tgz ab
