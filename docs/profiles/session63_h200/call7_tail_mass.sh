#!/usr/bin/env bash
# Session 63, call 7 (a fresh machine; CCE_COMMIT=<HEAD> bash <this>): tail_mass_kernel over groups of tiles
# (tail_mass_groups.patch: a block per group of up to 8 tiles, so that a row's own values are read once per group).
# This tree built whole in /tmp/build, main's tree (the patch reversed) beside it (stage 10 only); the kernel's
# duration under ncu at lm32k's and gemma2's shapes, both trees; then the whole GPU suite on this tree.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call7
branch_and_main_builds docs/profiles/session63_h200/tail_mass_groups.patch stage10_plan_per_batch || exit 1
plan_kernel_times "tail_mass" new=/tmp/build main=/tmp/build-main
gpu_suite 560 || exit 1
cd $OUT && tar czf call7.tgz call7 && rm -rf call7
