#!/usr/bin/env bash
# Session 45, call 1 (one H200), on 231f067 as committed: the PDL chain benchmark first (an idle GPU); then, while
# lm_data.py trains lm32k's model, the build, the whole GPU suite and the mutant g08_sort_key_ascending (cub's form);
# then at lm32k's trained data: cce_bench (the floor and stage 10, loss + grad) three rounds, and bench/peers.py
# (torch.compile and the stage's op) in one process.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R
{ echo "tree: 231f067"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90 docs/wip/pdl/chain_bench.cu -o /tmp/chain_bench > $R/chain_build.log 2>&1 && timeout 60 /tmp/chain_bench > $R/chain_bench.txt 2>&1
echo "chain rc $? at $((SECONDS-T0)) s"; cat $R/chain_bench.txt | tail -12
(timeout 300 python3 bench/lm_data.py --out /tmp/cce-lm-data --only lm32k > $R/lm_data.log 2>&1; echo "lm rc $? at $((SECONDS-T0)) s" > $R/lm.rc) &
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(timeout 280 python3 scripts/mutants.py --gpu --only g08_sort_key_ascending --build-dir /tmp/mut --json $R/mutants.json > $R/mutants.txt 2>&1; echo "mutant rc $? at $((SECONDS-T0)) s" > $R/mut.rc) &
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
while { [ ! -f $R/lm.rc ] || [ ! -f $R/mut.rc ]; } && [ $((SECONDS-T0)) -lt 420 ]; do sleep 2; done; cat $R/lm.rc $R/mut.rc 2>/dev/null; tail -4 $R/mutants.txt
for round in 1 2 3; do
  [ $((SECONDS-T0)) -lt 470 ] || break
  CCE_COMMIT=231f067 timeout 40 /tmp/build/bench/cce_bench --shapes=lm32k --lm-data=/tmp/cce-lm-data \
    --benchmark_filter='^(stage10_plan_per_batch|cublas_floor)/loss_grad/' \
    --benchmark_out=$R/bench_lm32k_$round.json --benchmark_out_format=json > $R/bench_$round.txt 2>&1
  echo "round $round rc $?: $(grep -E 'median' $R/bench_$round.txt | awk '{print $1, $2, $3}' | tr '\n' ' ')"
done
if [ $((SECONDS-T0)) -lt 500 ]; then
  timeout $((580-(SECONDS-T0))) python3 bench/peers.py --shapes lm32k --lm-data /tmp/cce-lm-data --modes loss_grad \
    --impls peer_torch_compile,stage10_plan_per_batch_op --cce-python /tmp/build/python --interleave \
    --floor-json $R/bench_lm32k_1.json --out $R/peers_lm32k.json > $R/peers.txt 2>&1
  echo "peers rc $? at $((SECONDS-T0)) s"; grep -E "median|ms" $R/peers.txt | tail -8
fi
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
