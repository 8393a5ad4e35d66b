#!/usr/bin/env bash
# For the next session with two H200 (prepared in session 52, not run): on the tree submitted, stage 11's two-GPU
# tests (call 4 ran the suite with the budget 0.022 on one GPU; call 3 ran them with 0.025), then the GPU mutants of
# stage 10's automatic eps, whose code this session changed (misplaced_mass_kernel, first_within_budget).
T0=$SECONDS
R=$OUT/checks; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R "_2gpu" -j4 --timeout 120) > $R/ctest_2gpu.log 2>&1
echo "2gpu rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_2gpu.log)"
ONLY=""; for m in g10_misplaced_mass_keeps_target g10_scan_skips_first g10_keep_within_budget_one_off g10_masses_not_on_host; do ONLY="$ONLY --only $m"; done
timeout $((560 - (SECONDS-T0))) python3 scripts/mutants.py --gpu $ONLY --arch 90 --json $R/mutants.json > $R/mutants.log 2>&1
echo "mutants rc $? ($((SECONDS-T0)) s)"; tail -12 $R/mutants.log
