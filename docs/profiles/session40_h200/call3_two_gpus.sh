#!/usr/bin/env bash
# Session 40, call 3 (two H200 of one host, nvidia-h200-x2), after stage 11's dense plan before the forward: stage 11
# at P=2 (with
# --compare-single: stage 10 on GPU 0 alone, same inputs, same process) and at P=1, three rounds, at gemma2
# (realistic), N=32768 D=4096 V=256000 (realistic) and gemma2_flat (random: the dense plan), bf16, loss + gradient.
set -o pipefail
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; nvidia-smi topo -m > $R/topo.txt 2>&1; git rev-parse HEAD > $R/commit.txt
git status --short > $R/status.txt
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
S=/tmp/build/stages/stage11_sharded_vocabulary
for round in 1 2 3; do
  for shape in gemma2 large gemma2_flat; do
    case $shape in
      gemma2) a="--n 8192 --d 2304 --v 256000 --data realistic";;
      large) a="--n 32768 --d 4096 --v 256000 --data realistic";;
      gemma2_flat) a="--n 8192 --d 2304 --v 256000 --data random";;
    esac
    CCE_COMMIT=$(git rev-parse --short HEAD) timeout 150 $S $a --dtype bf16 --backward --gpus 2 --compare-single --iters 20 \
      --json $R/${shape}_p2_r$round.json > $R/${shape}_p2_r$round.txt 2>&1
    echo "r$round $shape P=2 rc $?: $(grep -E '^  time|check  ' $R/${shape}_p2_r$round.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-260)"
    CCE_COMMIT=$(git rev-parse --short HEAD) timeout 100 $S $a --dtype bf16 --backward --gpus 1 --iters 20 \
      --json $R/${shape}_p1_r$round.json > $R/${shape}_p1_r$round.txt 2>&1
    echo "r$round $shape P=1 rc $?: $(grep -E '^  time' $R/${shape}_p1_r$round.txt | tr -s ' ' | cut -c1-160)"
    [ $((SECONDS-T0)) -gt 470 ] && break 2
  done
done
grep -h -E "^  (plan|joined|memory)" $R/*_r1.txt | cut -c1-200 | head -20
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
