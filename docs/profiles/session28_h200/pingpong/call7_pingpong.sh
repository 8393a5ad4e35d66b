#!/usr/bin/env bash
# One device call, a fresh machine: the wgmma pipeline's ping-pong variant (CCE_EXP_PINGPONG=1, branch
# wip/pingpong-forward) checked and timed. Builds the GPU test binary and stage 10; with the switch on: the tile
# engine's pipeline GEMM tests, stage 03's and stage 10's reference tests and stage 10's plan tests, two dense checks
# at odd shapes; then A/B (switch off, on) of stage 10's loss + grad at gemma2_flat's and lm128k_s0's shapes on
# random data (the dense plan: its keeping forward runs on the pipeline), and at gemma2 (sparse; the forward folds).
set -o pipefail
T0=$SECONDS
R=$OUT/pp; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git log -1 --format=%h > $R/head.txt; git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build test_stages_gpu stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -30; exit 1; }
echo "build $((SECONDS-T0)) s"
F='AllPaths/TileEngineGemm.*pipeline*:AllStages/StageVsReference.MatchesReferenceWithPoisonedOutputs/stage10*:AllStages/StageVsReference.MatchesReferenceWithPoisonedOutputs/stage03*:PlanPerBatch.*'
CCE_EXP_PINGPONG=1 timeout 80 /tmp/build/tests/gpu/test_stages_gpu --gtest_filter="$F" > $R/gtest_pingpong.log 2>&1
echo "gtest (ping-pong) rc $? $(grep -E '^\[  PASSED|^\[  FAILED|tests ran' $R/gtest_pingpong.log | tr '\n' ' ') ($((SECONDS-T0)) s)"
grep '^\[  FAILED' $R/gtest_pingpong.log | head -5
S=/tmp/build/stages/stage10_plan_per_batch
for shape in "1100 192 30011 --reduction none --softcap 30" "300 128 16411 --reduction sum --dense-chunk-rows 128"; do
  set -- $shape; n=$1 d=$2 v=$3; shift 3
  CCE_EXP_PINGPONG=1 timeout 30 $S --n $n --d $d --v $v --dtype bf16 --plan dense --backward --check "$@" > $R/check_${n}.txt 2>&1
  echo "check (ping-pong) $n x $d x $v: rc $? $(grep -m1 -iE 'passed|failed' $R/check_${n}.txt)"
done
for round in 1 2; do for pp in 0 1; do
  [ $((SECONDS-T0)) -gt 200 ] && break 2
  for shape in "8192 2304 256000 random" "8192 2048 128000 random" "8192 2304 256000 realistic"; do
    set -- $shape
    f=$R/r${round}_pp${pp}_$3_$4.txt
    CCE_EXP_PINGPONG=$pp timeout 40 $S --n $1 --d $2 --v $3 --dtype bf16 --data $4 --seed 1234 --backward --iters 20 > $f 2>&1
    echo "r$round pingpong=$pp V=$3 $4: rc $? $(grep ' time ' $f | sed -E 's/ +/ /g') ($((SECONDS-T0)) s)"
  done
done; done
cd $OUT && tar czf pp.tgz pp && rm -rf pp
echo "total $((SECONDS-T0)) s"
