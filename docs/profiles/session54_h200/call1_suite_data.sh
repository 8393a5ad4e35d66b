#!/usr/bin/env bash
# Session 54, call 1 (one H200; carry [".quack-wheels/xz4.00"], the first of QuACK's four parts: the tar.xz that
# docs/profiles/session51_h200/pack_quack.sh makes, split in four (split -n 4 -d), a tree of 42 MiB and a third not
# fitting in a call's 64; run as CCE_COMMIT=<HEAD> bash <this>, the device copy's git
# HEAD being stale): the whole GPU suite and the PyTorch op's tests on HEAD (owed since session 53's half candidates),
# while bench/lm_data.py trains lm32k's and lm128k's models beside them; then the generated shapes' inputs. Nothing is
# timed in this call: calls 2-5 time the floor, stage 10 and the peers on this machine's data.
T0=$SECONDS
R=$OUT/call1; mkdir -p $R /tmp/q /tmp/s54 /tmp/cce-inputs
cp .quack-wheels/xz4.00 /tmp/q/ && echo "carried $(du -h /tmp/q/xz4.00 | cut -f1)"
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(timeout 480 python3 bench/lm_data.py --out /tmp/cce-lm-data --stats-dir $R/lm_data > $R/lm_data.log 2>&1
 echo "lm_data rc $? at $((SECONDS-T0)) s" > $R/lm_data.rc) &
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call1.tgz call1; exit 1; }
echo "build $((SECONDS-T0)) s"
(cd /tmp/build && timeout 330 ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_gpu.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_gpu.log | head -20
(cd /tmp/build && timeout $((520 - (SECONDS-T0))) ctest -L pytorch -R pytorch.op -j2 --timeout 200) > $R/ctest_op.log 2>&1
echo "op tests rc $? ($((SECONDS-T0)) s): $(grep -E 'tests passed' $R/ctest_op.log)"; grep -E '\*\*\*Failed|Timeout|Not Run' $R/ctest_op.log | head
for s in "gpt2 20480 768 50257 realistic" "llama3 8192 4096 128256 realistic" "gemma2 8192 2304 256000 realistic" "gemma2_flat 8192 2304 256000 random"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data $5 --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
done
echo "inputs at $((SECONDS-T0)) s"
while [ ! -f $R/lm_data.rc ] && [ $((SECONDS-T0)) -lt 570 ]; do sleep 2; done; cat $R/lm_data.rc
ls /tmp/cce-lm-data
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call1.tgz call1
