#!/usr/bin/env bash
# Session 32, call 1: where the host's own code sits inside one timed sparse call. host_marks_probe.patch (not
# merged) stamps the host clock at 16 points of stage 10's call (runner entry, forward set-up, first launch, ...,
# the decision's wait, the recomputation's runs, finish_de) and prints each interval's mean at exit. The stage
# executable, generated data, at lm32k's, gpt2's, llama3's and gemma2's shapes; main's build timed beside it.
set -o pipefail
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
which perf nsys > $R/tools.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && timeout 150 ninja -C /tmp/build stage10_plan_per_batch) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
cp /tmp/build/stages/stage10_plan_per_batch /tmp/s10_main
patch -p1 < docs/profiles/session32_h200/host_marks_probe.patch > $R/patch.log 2>&1 || { cat $R/patch.log; exit 1; }
timeout 150 ninja -C /tmp/build stage10_plan_per_batch > $R/build_probe.log 2>&1 || { grep -B2 -A8 error $R/build_probe.log | head -40; exit 1; }
echo "builds $((SECONDS-T0)) s"
for dims in "lm32k --n 8192 --d 768 --v 32000" "gpt2 --n 20480 --d 768 --v 50257" "llama3 --n 8192 --d 4096 --v 128256" "gemma2 --n 8192 --d 2304 --v 256000"; do
  set -- $dims; name=$1; shift
  for tree in main probe; do
    B=/tmp/build/stages/stage10_plan_per_batch; [ $tree = main ] && B=/tmp/s10_main
    timeout 60 $B "$@" --data realistic --backward --iters 50 > $R/${name}_$tree.txt 2>&1
    echo "$name $tree: $(grep -E 'time  ' $R/${name}_$tree.txt | cut -c1-120)"
  done
  grep "^mark" $R/${name}_probe.txt
done
echo "total $((SECONDS-T0)) s"
