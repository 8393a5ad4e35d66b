#!/usr/bin/env bash
# For a next session (written in session 58, not run), right after next_suite.sh on the same warm machine (its builds
# and training in /tmp): cce_bench's stage 10 (loss + grad) of main's tree and the branch in turns, three rounds, at
# lm128k, lm32k, gpt2, llama3, gemma2, the floor in round 1 (about 280 s; cce_bench's warm-up calls are earlier
# batches of the same model, so the branch's timed calls group once); then the branch's GPU mutant.
T0=$SECONDS
R=$OUT/ab; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
stage10_rounds 3 lm128k,lm32k,gpt2,llama3,gemma2 main=/tmp/build-main next=/tmp/build
cd $OUT && tar czf ab.tgz ab && cd - > /dev/null
timeout $((580 - (SECONDS-T0))) python3 scripts/mutants.py --gpu --build-dir /tmp/build-mut \
  --only g10_next_batch_forgets_the_eps > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -4 $R/mutants.txt
cd $OUT && tar czf ab.tgz ab
