#!/usr/bin/env bash
# Session 35, call 2 (call 1's warm machine; carries QuACK's part.01): the three GPU mutants of the dense chunks'
# target rows (g10_target_rows_without_products, _never_whole, _always_whole) with one baseline.
set -o pipefail
T0=$SECONDS
R=$OUT/call2; mkdir -p $R /tmp/q
cp .quack-wheels/part.01 /tmp/q/ 2>/dev/null
git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
timeout 560 python3 scripts/mutants.py --gpu --only g10_target_rows_without_products --only g10_target_rows_never_whole \
  --only g10_target_rows_always_whole --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1
echo "mutants rc $?: $(grep -E 'caught|survived|did not build' $R/mutants.txt | tail -4 | tr '\n' ' ' | cut -c1-400)"
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
