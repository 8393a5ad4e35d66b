#!/usr/bin/env bash
# For a next session (written in session 60, not run), right after next_ws_suite.sh on the same warm machine (its
# builds and training in /tmp): the kept-tile kernels of both trees on a dense kept set under ncu (llama3's shape on
# random data, stage 10 --plan sparse: every pair kept; each kernel's time summed over the call's chunks, TFLOP/s at
# 2·128·128·D per kept pair and product; issue 25's 550 TFLOP/s), then cce_bench's stage 10 (loss + grad) of main's
# tree and the branch in turns, three rounds, at lm128k, lm32k, gpt2, llama3, gemma2, the floor in round 1. About 420 s.
T0=$SECONDS
R=$OUT/ab; mkdir -p $R
source docs/profiles/device_steps/steps.sh
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
dense_kept_kernels main=/tmp/build-main ws=/tmp/build
stage10_rounds 3 lm128k,lm32k,gpt2,llama3,gemma2 main=/tmp/build-main ws=/tmp/build
cd $OUT && tar czf ab.tgz ab
