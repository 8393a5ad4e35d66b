#!/usr/bin/env bash
# Session 38, call 1, on a tree with eager_call_cpp.patch applied (git apply): the eager call from C++
# (python/cce_torch_op.cpp) built against the device's PyTorch;
# the op's tests; python/op_overhead_probe.py (the C++ call and the Python path in turns, one process);
# session 37's prefix_steps.py (the Python path's steps, cold).
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
python3 -c "import torch; print(torch.__version__)" > $R/torch.txt 2>&1
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A12 -i "error" $R/build.log | head -60; cd $OUT && tar czf call1.tgz call1; exit 1; }
grep "python:" $R/build.log; ls /tmp/build/python/cce_stages/
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && ctest -R pytorch.op -j4 --timeout 600 --output-on-failure) > $R/ctest_op.log 2>&1
tail -15 $R/ctest_op.log
echo "op tests at $((SECONDS-T0)) s"
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
echo "inputs at $((SECONDS-T0)) s"
timeout 240 python3 python/op_overhead_probe.py /tmp/build/python $R/op_overhead_probe.json > $R/probe.txt 2>&1
echo "probe rc $? at $((SECONDS-T0)) s"; tail -3 $R/probe.txt | cut -c1-300
python3 docs/profiles/session38_h200/overhead_summary.py $R/op_overhead_probe.json
timeout 100 python3 docs/profiles/session37_h200/prefix_steps.py /tmp/build/python $R/prefix_steps.json > $R/prefix.txt 2>&1
echo "prefix rc $?"; cat $R/prefix.txt | cut -c1-400
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
