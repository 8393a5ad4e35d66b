#!/usr/bin/env bash
# For a next session (written in session 57, not run), right after next_suite.sh on the same warm machine (its builds
# and training in /tmp): cce_bench's stage 10 (loss + grad) of main's tree, the bucketed order alone and the branch
# (with the second grouping) in turns, three rounds, at lm128k, lm32k, gpt2, llama3, gemma2, the floor in round 1
# (about 430 s); then the three GPU mutants of the grouping (scripts/mutants.py --gpu) while time is left.
T0=$SECONDS
R=$OUT/ab; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
stage10_rounds 3 lm128k,lm32k,gpt2,llama3,gemma2 main=/tmp/build-main bucket=/tmp/build-bucket regroup=/tmp/build
cd $OUT && tar czf ab.tgz ab && cd - > /dev/null
timeout $((580 - (SECONDS-T0))) python3 scripts/mutants.py --gpu --only g10_grouping_without_rarest_tile \
  g10_grouping_rows_hot_per_block g10_regroup_at_the_eps > $R/mutants.txt 2>&1
echo "mutants rc $? at $((SECONDS-T0)) s"; tail -5 $R/mutants.txt
cd $OUT && tar czf ab.tgz ab
