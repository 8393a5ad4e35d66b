#!/usr/bin/env bash
# Session 29, call 7 (call 6's warm machine and its two builds): add_target_terms_kernel's duration under ncu,
# three launches, in cce_bench's stage 10 at lm128k_s0, main's tree (build-base) and the change (build).
for t in build-base build; do timeout 80 ncu --metrics gpu__time_duration.sum -k regex:add_target_terms -c 3 /tmp/$t/bench/cce_bench --shapes=lm128k_s0 --lm-data=/tmp/cce-lm-data --benchmark_filter='^stage10_plan_per_batch/loss_grad/' 2>&1 | grep -E "add_target_terms|gpu__time_duration" | cut -c1-120 | sed "s/^/$t: /"; done
