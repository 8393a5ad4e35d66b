#!/usr/bin/env bash
# Session 48, call 4 (two H200): call 3 saw stage 11's forced-sparse two-GPU run (N=77, D=100, V=1129) hang, with
# no output, in one of three runs on main's code and one of three on new's. Stage 11 built with host debug
# information (RelWithDebInfo: -O2 -g; no device -G) from this tree; the command line run up to 12 times, its output
# line-buffered; a run still alive after 20 s gets cuda-gdb attached for every host thread's stack, then is killed.
T0=$SECONDS
R=$OUT/call4; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; nvidia-smi topo -m; } > $R/status.txt 2>&1
(cmake -S . -B /tmp/build-dbg -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-dbg stage11_sharded_vocabulary) > $R/build.log 2>&1 || { tail -30 $R/build.log; cd $OUT && tar czf call4.tgz call4; exit 1; }
echo "build $((SECONDS-T0)) s"
ARGS="--check --backward --iters 0 --compare-single --gpus 2 --skip-missing-gpus --n 77 --d 100 --v 1129 --plan sparse --softcap 30"
hangs=0
for i in $(seq 1 12); do
  [ $hangs -ge 2 ] && break; [ $((SECONDS-T0)) -gt 420 ] && break
  S=$SECONDS
  stdbuf -oL -eL /tmp/build-dbg/stages/stage11_sharded_vocabulary $ARGS > $R/run_$i.txt 2>&1 &
  PID=$!
  while kill -0 $PID 2>/dev/null && [ $((SECONDS-S)) -lt 20 ]; do sleep 0.5; done
  if kill -0 $PID 2>/dev/null; then
    hangs=$((hangs+1))
    timeout 60 cuda-gdb -batch -p $PID -ex "set pagination off" -ex "info threads" -ex "thread apply all bt 40" -ex "detach" > $R/stacks_$i.txt 2>&1
    nvidia-smi > $R/smi_$i.txt 2>&1
    kill -9 $PID; wait $PID 2>/dev/null
    echo "run $i HUNG: last lines: $(tail -3 $R/run_$i.txt | tr '\n' '|' | cut -c1-300)"
    grep -E "^#|^Thread|^\*? +[0-9]+ +Thread" $R/stacks_$i.txt | grep -vE "libc.so|clone|start_thread" | head -60
  else
    wait $PID; echo "run $i rc $? in $((SECONDS-S)) s"
  fi
done
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call4.tgz call4
