#!/usr/bin/env bash
# Session 28, call 1, as it ran (its patch, docs/wip/fused_keep_exp.patch, is now 7d25ee1 and gone from docs/wip/):
# (stage 10's keep reuses the fold's exponentials) on
# one H200, against main's tree. Run from the repository root, main checked out, the patch not applied:
#   1. builds main's stage 10 and cce_bench in /tmp/build_main, the patched tree's everything in /tmp/build;
#   2. the patched tree's whole GPU suite (about 300 s) and stage 10's dense checks at odd shapes (softcap,
#      ignore_index, chunks, reductions);
#   3. A/B, trees alternating, two rounds: stage 10's loss + grad at gemma2_flat (N=8192 D=2304 V=256000) and at
#      lm128k_s0's shape on flat random data (N=8192 D=2048 V=128000), cce_bench-like single calls via --iters.
set -o pipefail
T0=$SECONDS
R=$OUT/fused; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git log -1 --format=%h > $R/head.txt; git status --short > $R/status.txt
# The working tree as it came (the device's copy may report an older HEAD with later commits as changes):
# every file git tracks or would track, copied before the patch is applied.
rm -rf /tmp/src-main && mkdir -p /tmp/src-main
git ls-files --cached --others --exclude-standard -z | xargs -0 cp --parents -t /tmp/src-main
(cmake -S /tmp/src-main -B /tmp/build_main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build_main stage10_plan_per_batch) > $R/build_main.log 2>&1 &
git apply docs/wip/fused_keep_exp.patch || exit 1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
wait; echo "builds $((SECONDS-T0)) s"
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 240 > $R/ctest_gpu.log 2>&1)
grep -E "tests passed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
S=/tmp/build/stages/stage10_plan_per_batch
for shape in "77 100 1129 --softcap 30 --ignore-frac 0.1" "77 128 1129 --dense-chunk-rows 30" "1100 192 30011 --reduction none --softcap 30" "300 128 16411 --reduction sum --dense-chunk-rows 128"; do
  set -- $shape; n=$1 d=$2 v=$3; shift 3
  timeout 60 $S --n $n --d $d --v $v --dtype bf16 --plan dense --backward --check "$@" > $R/check_${n}x${d}x${v}.txt 2>&1
  echo "check $n x $d x $v $*: rc $? $(grep -m1 -i 'dE ' $R/check_${n}x${d}x${v}.txt)"
done
for round in 1 2; do for tree in main fused; do
  [ $((SECONDS-T0)) -gt 520 ] && break 2
  B=/tmp/build; [ $tree = main ] && B=/tmp/build_main
  for shape in "8192 2304 256000" "8192 2048 128000"; do
    set -- $shape
    f=$R/${tree}_r${round}_$3.txt
    timeout 120 $B/stages/stage10_plan_per_batch --n $1 --d $2 --v $3 --dtype bf16 --data random --seed 1234 --backward --iters 20 > $f 2>&1
    echo "r$round $tree V=$3: $(grep ' time ' $f | sed -E 's/ +/ /g') ($((SECONDS-T0)) s)"
  done
done; done
git apply -R docs/wip/fused_keep_exp.patch
echo "total $((SECONDS-T0)) s"
