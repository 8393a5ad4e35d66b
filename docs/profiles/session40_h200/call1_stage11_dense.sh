#!/usr/bin/env bash
# Session 40, call 1 (two H200): build; stage 10's and stage 11's tests; stage 11 at gemma2_flat (P=2, P=1,
# --compare-single) and gemma2 realistic (P=2), auto plan: the first step decides, the timed ones are planned from it.
set -uo pipefail
mkdir -p "$OUT"
{ git log --oneline -1; git status --short; nvidia-smi -L; nvidia-smi topo -m; } > "$OUT/status.txt" 2>&1
cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT/build.log" 2>&1 &&
  ninja -C /tmp/build >> "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
cd /tmp/build
ctest -R "stage11|stage10|PlanPerBatch" -j4 --timeout 300 --output-on-failure > "$OUT/ctest_stage10_11.log" 2>&1
tail -15 "$OUT/ctest_stage10_11.log"
S=/tmp/build/stages/stage11_sharded_vocabulary
G="--backward --n 8192 --d 2304 --v 256000"
$S $G --data random --gpus 2 --compare-single --iters 20 --json "$OUT/flat_p2.json" > "$OUT/flat_p2.txt" 2>&1; echo "flat p2 rc=$?"
$S $G --data random --gpus 1 --iters 20 --json "$OUT/flat_p1.json" > "$OUT/flat_p1.txt" 2>&1; echo "flat p1 rc=$?"
$S $G --data random --gpus 2 --plan dense --iters 20 --json "$OUT/flat_p2_forced.json" > "$OUT/flat_p2_forced.txt" 2>&1; echo "flat p2 forced rc=$?"
$S $G --gpus 2 --iters 20 --json "$OUT/gemma2_p2.json" > "$OUT/gemma2_p2.txt" 2>&1; echo "gemma2 p2 rc=$?"
grep -h "time\|memory\|backward  \|plan  \|check " "$OUT"/flat_p2.txt "$OUT"/flat_p1.txt "$OUT"/flat_p2_forced.txt "$OUT"/gemma2_p2.txt
