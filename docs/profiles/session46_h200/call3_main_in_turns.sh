#!/usr/bin/env bash
# Session 46, call 3 (one H200, the machine of call 2, still warm: its /tmp/build of 9434a5a and /tmp/cce-lm-data
# kept). Call 2's main build failed: the device's git knows the session's first HEAD (0f8bbd4), not 963ff79 (the same
# code; 963ff79 added call 1's script). So: main built from `git archive 0f8bbd4`, then cce_bench (the floor and
# stage 10, loss + grad) of both trees in turns: lm32k's trained data four rounds, gpt2's generated data two.
# (Run as one command line; written out here as it ran.)
R=$OUT/call3; mkdir -p $R; T0=$SECONDS
rm -rf /tmp/main-src; mkdir /tmp/main-src; git archive 0f8bbd4 | tar xf - -C /tmp/main-src && (cd /tmp/main-src && cmake -S . -B /tmp/build-main -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && ninja -C /tmp/build-main cce_bench) > $R/build_main.log 2>&1
echo "build rc $? $((SECONDS-T0)) s"; ls /tmp/build/bench/cce_bench /tmp/cce-lm-data/lm32k
for round in 1 2 3 4; do for tree in main new; do
  B=/tmp/build; C=9434a5a; [ $tree = main ] && B=/tmp/build-main && C=0f8bbd4
  CCE_COMMIT=$C timeout 30 $B/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$R/bench_lm32k_${tree}_$round.json --benchmark_out_format=json > $R/bench_${tree}_$round.txt 2>&1
  echo "lm32k $round $tree rc $?"
done; done
for round in 1 2; do for tree in main new; do
  B=/tmp/build; C=9434a5a; [ $tree = main ] && B=/tmp/build-main && C=0f8bbd4
  CCE_COMMIT=$C timeout 30 $B/bench/cce_bench --shapes=gpt2 --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' --benchmark_out=$R/bench_gpt2_${tree}_$round.json --benchmark_out_format=json > $R/bench_gpt2_${tree}_$round.txt 2>&1
  echo "gpt2 $round $tree rc $?"
done; done
echo "total $((SECONDS-T0)) s"; cd $OUT && tar czf call3.tgz call3
