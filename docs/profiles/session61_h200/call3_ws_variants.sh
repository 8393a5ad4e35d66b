#!/usr/bin/env bash
# Session 61, call 3 (one H200, fresh machine): the warp-specialized owners with the producer's next source found
# after its copies are issued (the branch's tree, kLag = 2), the same with kLag = 4 (five steps' copies in flight), and
# main's tree (ws_vs_main.patch reversed): the kept-tile kernels' time on llama3's shape with every pair kept (ncu),
# ncu --set full of one dC and one dE launch in main's tree and in the kLag = 4 tree (stalls, tensor pipe), then cce_bench's
# stage 10 (loss + grad) of the three in turns at gpt2, llama3, gemma2 (generated data: no training).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start variants
targets="bench/cce_bench stage10_plan_per_batch"
tree_without /tmp/main-tree docs/profiles/session61_h200/ws_vs_main.patch
tree_without /tmp/lag4-tree
sed -i 's/constexpr int kWsStages = 6, kLag = 2;/constexpr int kWsStages = 6, kLag = 4;/' /tmp/lag4-tree/stages/09_deterministic_products/kept_products.cu
grep -c "kLag = 4" /tmp/lag4-tree/stages/09_deterministic_products/kept_products.cu
(build /tmp/build-main /tmp/main-tree $targets > $R/build_main.log 2>&1; echo "main build rc $?") &
(build /tmp/build-lag4 /tmp/lag4-tree $targets > $R/build_lag4.log 2>&1; echo "lag4 build rc $?") &
build /tmp/build . $targets > $R/build.log 2>&1; echo "lag2 build rc $?"
wait; echo "builds $((SECONDS-T0)) s"
dense_kept_kernels main=/tmp/build-main lag2=/tmp/build lag4=/tmp/build-lag4
for pair in main=/tmp/build-main lag4=/tmp/build-lag4; do
  tree=${pair%%=*}; dir=${pair#*=}
  for kernel in dc_products de_products; do
    timeout 60 ncu --set full -k regex:$kernel -s 3 -c 1 $dir/stages/stage10_plan_per_batch --n 8192 --d 4096 \
      --v 128256 --dtype bf16 --data random --seed 1234 --backward --plan sparse --iters 0 > $R/ncu_full_${kernel}_$tree.txt 2>&1
    echo "ncu full $kernel $tree rc $? ($((SECONDS-T0)) s)"
  done
done
stage10_rounds 2 gpt2,llama3,gemma2 main=/tmp/build-main lag2=/tmp/build lag4=/tmp/build-lag4
cd $OUT && tar czf variants.tgz variants
