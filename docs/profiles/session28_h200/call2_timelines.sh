#!/usr/bin/env bash
# The second call after call1_fused_keep_exp.sh, back to back (the machine warm: /tmp/build, /tmp/build_main and
# /tmp/src-main are kept): where the dense plan's time goes at lm128k_s0's shape, N=8192 D=2048 V=128000, on flat
# random data (stage 01 --save), and at gemma2_flat's: bench/stage_timeline.py through the C interface for main's
# tree and the patched one (the last of 5 calls traced), then ncu of the forward that keeps q (FoldThenKeepTile)
# in each tree at the lm128k_s0 shape.
set -o pipefail
T0=$SECONDS
R=$OUT/fused2; mkdir -p $R
for s in "lm128k_flat 8192 2048 128000" "gemma2_flat 8192 2304 256000"; do
  set -- $s
  [ -f /tmp/cce-inputs/$1/targets.npy ] || timeout 120 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data random --seed 1234 --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1
done
(cd /tmp/src-main && ninja -C /tmp/build_main cce_capi) > $R/build_capi_main.log 2>&1
echo "inputs and main's C interface $((SECONDS-T0)) s"
for tree in main fused; do
  B=/tmp/build; [ $tree = main ] && B=/tmp/build_main
  timeout 150 python3 bench/stage_timeline.py $B/python /tmp/cce-inputs/lm128k_flat /tmp/cce-inputs/gemma2_flat --calls 5 --out $R/timeline_$tree.txt > $R/timeline_$tree.log 2>&1
  echo "timeline $tree rc $? $(grep -c '^span' $R/timeline_$tree.txt) spans ($((SECONDS-T0)) s)"
  grep '^span\|^ *1 .*wgmma_pipeline_kernel\|^ *1 .*nvjet' $R/timeline_$tree.txt
done
for tree in main fused; do
  B=/tmp/build; [ $tree = main ] && B=/tmp/build_main
  timeout 120 ncu --set full -k regex:FoldThenKeepTile -c 1 $B/stages/stage10_plan_per_batch --n 8192 --d 2048 --v 128000 --dtype bf16 --data random --seed 1234 --backward --plan dense --iters 1 > $R/ncu_keep_$tree.txt 2>&1
  echo "ncu $tree rc $? $(grep -m1 'Duration' $R/ncu_keep_$tree.txt) ($((SECONDS-T0)) s)"
done
echo "total $((SECONDS-T0)) s"
