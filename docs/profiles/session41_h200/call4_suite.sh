#!/usr/bin/env bash
# Session 41, call 4 (two H200), the tree submitted (6f3cb26's successor, named in commit.txt): the whole GPU suite
# (stage 11's two-GPU runs among them, --check now asserting the memory model); the op's tests; gemma2_flat at P=2
# and P=1, 40 timed steps each with every step's time in the JSON (steps 17 and 33 of the run decide on a sample).
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
C=$(cat docs/profiles/session41_h200/commit.txt)
{ echo "tree: $C"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head -20
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 300 --output-on-failure) > $R/ctest_op.log 2>&1
echo "op tests rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_op.log
S=/tmp/build/stages/stage11_sharded_vocabulary
G="--backward --n 8192 --d 2304 --v 256000 --dtype bf16 --data random"
for g in 2 1; do
  CCE_COMMIT=$C timeout 120 $S $G --gpus $g --iters 40 --json $R/flat_p$g.json > $R/flat_p$g.txt 2>&1
  echo "flat P=$g rc $?: $(grep -E '^  (time|memory)' $R/flat_p$g.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-400)"
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
