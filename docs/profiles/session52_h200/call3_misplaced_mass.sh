#!/usr/bin/env bash
# Session 52, call 3 (two H200): stage 10's automatic eps from the misplaced mass (the tail correction's residual
# bound M(1 - M/(|T| p_max)) per dropped pair, budget 0.025, candidates 2^-8..2^-17) instead of the dropped mass.
# GPU 0: the whole GPU suite, then stage 11's two-GPU tests. GPU 1 meanwhile: one training of lm128k's model, the
# stage executable's candidates line at its snapshots, and peers.py (eager PyTorch, stage 10's op; 10 reps each) at
# lm128k, lm128k_s300, lm128k_s100 and lm128k_s30: the time and the dE and dC errors against eager's on the same inputs.
T0=$SECONDS
R=$OUT/call3; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(CUDA_VISIBLE_DEVICES=1 timeout 300 python3 bench/lm_data.py --only lm128k --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
( while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 330 ]; do sleep 2; done; cat $R/lm_data.rc
  S10=/tmp/build/stages/stage10_plan_per_batch
  for s in lm128k lm128k_s300 lm128k_s100 lm128k_s30 lm128k_s0; do
    CUDA_VISIBLE_DEVICES=1 timeout 30 $S10 --load /tmp/cce-lm-data/$s --backward --iters 10 > $R/exec_$s.txt 2>&1
    echo "$s: $(grep -E 'drop   |candidates|backward  |time  ' $R/exec_$s.txt | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
  done
  CUDA_VISIBLE_DEVICES=1 timeout 200 python3 bench/peers.py --shapes lm128k,lm128k_s300,lm128k_s100,lm128k_s30 \
    --impls peer_torch_eager,stage10_plan_per_batch_op --modes loss_grad --reps 10 --lm-data /tmp/cce-lm-data \
    --cce-python /tmp/build/python --out $R/peers_lm.json > $R/peers_lm.txt 2>&1
  echo "peers rc $? at $((SECONDS-T0)) s"; grep -E " ms " $R/peers_lm.txt | cut -c1-200 ) > $R/gpu1.txt 2>&1 &
G1=$!
(cd /tmp/build && CUDA_VISIBLE_DEVICES=0 ctest -L "gpu|stage" -E "_2gpu" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_gpu.log | head -20
wait $G1; cat $R/gpu1.txt
(cd /tmp/build && ctest -R "_2gpu" -j4 --timeout 120) > $R/ctest_2gpu.log 2>&1
echo "2gpu rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_2gpu.log) $(grep -E '\*\*\*Failed|Timeout|Skipped' $R/ctest_2gpu.log | sed 's/.*stage11_sharded_vocabulary.//; s/ .*//' | tr '\n' ' ')"
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call3.tgz call3
