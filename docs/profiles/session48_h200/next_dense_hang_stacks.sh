#!/usr/bin/env bash
# For the next session (two H200, kind nvidia-h200-x2; not run yet): stacks of the dense plan's two-GPU hang that
# call 5's suite saw twice (stage 11's WORKLOG, session 48; dense_hang_reading.md beside this file). Stage 11 built with
# host debug information; the two dense command lines of stages/CMakeLists.txt, each run alone up to 8 times, then
# three at once (beside each other on the same two GPUs, as under ctest -j4) up to 4 rounds; a run alive after 30 s
# gets every host thread's stack (cuda-gdb), then is killed. Stops after three hangs.
T0=$SECONDS
R=$OUT/dense_hang; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build-dbg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-dbg stage11_sharded_vocabulary) > $R/build.log 2>&1 || { tail -30 $R/build.log; cd $OUT && tar czf dense_hang.tgz dense_hang; exit 1; }
echo "build $((SECONDS-T0)) s"
EXE=/tmp/build-dbg/stages/stage11_sharded_vocabulary
COMMON="--check --backward --iters 0 --compare-single --gpus 2 --skip-missing-gpus"
A_RANDOM="$COMMON --n 300 --d 200 --v 20001 --data random"
A_CHUNKS="$COMMON --n 300 --d 200 --v 20001 --plan dense --dense-chunk-rows 128 --reduction none --upstream random --softcap 30 --ignore-frac 0.1"
hangs=0
watch() {  # name pid start
  while kill -0 $2 2>/dev/null && [ $((SECONDS-$3)) -lt 30 ]; do sleep 0.5; done
  if kill -0 $2 2>/dev/null; then
    hangs=$((hangs+1))
    timeout 60 cuda-gdb -batch -p $2 -ex "set pagination off" -ex "info threads" -ex "thread apply all bt 40" -ex "detach" > $R/stacks_$1.txt 2>&1
    kill -9 $2; wait $2 2>/dev/null
    echo "$1 HUNG: $(tail -2 $R/run_$1.txt | tr '\n' '|' | cut -c1-200)"
    grep -E "^Thread|cce::|cuda[A-Z][a-zA-Z]+ \(|cu[A-Z][a-zA-Z]+ \(|nccl[A-Z]" $R/stacks_$1.txt | grep -vE "__invoke|std_thread" | head -40
  else
    wait $2; echo "$1 rc $? in $((SECONDS-$3)) s"
  fi
}
for i in $(seq 1 8); do for t in random chunks; do
  [ $hangs -ge 3 ] || [ $((SECONDS-T0)) -gt 300 ] && continue
  ARGS=$A_RANDOM; [ $t = chunks ] && ARGS=$A_CHUNKS
  S=$SECONDS; stdbuf -oL $EXE $ARGS > $R/run_${t}_alone_$i.txt 2>&1 & watch ${t}_alone_$i $! $S
done; done
for i in 1 2 3 4; do
  [ $hangs -ge 3 ] || [ $((SECONDS-T0)) -gt 480 ] && continue
  S=$SECONDS
  stdbuf -oL $EXE $A_RANDOM > $R/run_random_beside_$i.txt 2>&1 & P1=$!
  stdbuf -oL $EXE $A_CHUNKS > $R/run_chunks_beside_$i.txt 2>&1 & P2=$!
  stdbuf -oL $EXE $A_RANDOM --seed 7 > $R/run_random7_beside_$i.txt 2>&1 & P3=$!
  watch random_beside_$i $P1 $S; watch chunks_beside_$i $P2 $S; watch random7_beside_$i $P3 $S
done
echo "hangs $hangs, total $((SECONDS-T0)) s"
cd $OUT && tar czf dense_hang.tgz dense_hang
