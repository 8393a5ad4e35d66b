#!/usr/bin/env bash
# Session 63, call 1 (a fresh machine; run as CCE_COMMIT=<HEAD> bash <this>): the grouping's need bits in the work
# buffer (a2a8a02). This tree built whole in /tmp/build (call 2 runs the GPU suite there); beside it main's tree
# before the change (need_bits.patch reversed) in /tmp/build-main, cce_bench only. Stage 10's loss + grad at gemma2
# and llama3 by cce_bench, the two trees in turns, two rounds (the floor in round 1): time and peak MB;
# compute-sanitizer memcheck and racecheck on stage 10's sparse check.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call1
branch_and_main_builds docs/profiles/session63_h200/need_bits.patch cce_bench || exit 1
stage10_rounds 2 gemma2,llama3 new=/tmp/build old=/tmp/build-main
python3 docs/profiles/session63_h200/peaks.py $R/bench_*_[12].json
stage10_sanitizers /tmp/build
echo "call 1 done at $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1 && rm -rf call1
