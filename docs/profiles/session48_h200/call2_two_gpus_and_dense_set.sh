#!/usr/bin/env bash
# Session 48, call 2 (two H200 of one host): the tree of call 1 ("new", rows_in_de_and_unkept_grid.patch applied).
# (1) Stage 11's tests on both GPUs (its two-GPU cases were skipped in call 1's one-GPU suite).
# (2) The kept-tile kernels on a dense kept set (random data keeps every pair; stage 10 --plan sparse), gemma2's and
#     llama3's shapes, on GPU 0: loss + gradient of main and new (the executable's median of 3), then each kernel's
#     time under ncu (--clock-control none, one metric, the kernels serialized) summed over the call's chunks, as
#     session 31's call 4: TFLOP/s = 2·128·128·D·(kept pairs) per product / its time. New copies E's rows into the
#     token order there (several chunks) and spills no S tiles into dE's output, so it runs more chunks.
T0=$SECONDS
R=$OUT/call2; mkdir -p $R
{ git log --oneline -1; git status --short; nvidia-smi -L; } > $R/status.txt 2>&1
CM="-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90"
rm -rf /tmp/src-main; mkdir /tmp/src-main; tar cf - --exclude=.git . | tar xf - -C /tmp/src-main
(cd /tmp/src-main && git apply -R docs/profiles/session48_h200/rows_in_de_and_unkept_grid.patch && cmake -S . -B /tmp/build-main $CM > /dev/null && ninja -C /tmp/build-main stage10_plan_per_batch) > $R/build_main.log 2>&1 &
BM=$!
(cmake -S . -B /tmp/build $CM && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 -i error $R/build.log | head -40; cd $OUT && tar czf call2.tgz call2; exit 1; }
wait $BM; echo "builds $((SECONDS-T0)) s: main $(tail -1 $R/build_main.log)"
(cd /tmp/build && ctest -R "stage11|ShardedVocabulary" -j2 --timeout 200) > $R/ctest_stage11_2gpu.log 2>&1
echo "stage 11 rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_stage11_2gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout|Skipped" $R/ctest_stage11_2gpu.log | head
export CUDA_VISIBLE_DEVICES=0
for s in "gemma2_flat 8192 2304 256000" "llama3_flat 8192 4096 128256"; do
  set -- $s
  for tree in main new; do
    B=/tmp/build; [ $tree = main ] && B=/tmp/build-main
    timeout 60 $B/stages/stage10_plan_per_batch --n $2 --d $3 --v $4 --data random --seed 1234 --backward --plan sparse --iters 3 > $R/stage10_$1_$tree.txt 2>&1
    echo "$1 $tree rc $?: $(grep -E 'plan  |kept tiles|time  |backward  ' $R/stage10_$1_$tree.txt | tr -s ' ' | tr '\n' '|' | cut -c1-420)"
  done
done
ncu_kernels() {  # shape n d v tree
  local B=/tmp/build; [ $5 = main ] && B=/tmp/build-main
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum -k regex:"recompute_kept|dc_products|de_products|dc_unkept|rows_in_token_order" \
    $B/stages/stage10_plan_per_batch --n $2 --d $3 --v $4 --data random --seed 1234 --backward --plan sparse --iters 0 > $R/ncu_$1_$5.txt 2>&1
  echo "$1 $5 ncu rc $? ($((SECONDS-T0)) s)"
  python3 - $R/ncu_$1_$5.txt <<'PY'
import re, sys, collections
tot = collections.OrderedDict(); name = None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\s+(?:void )?(?:cce::)?\S*?(recompute_kept_kernel|dc_products_bf16|de_products_bf16|dc_unkept_rows|rows_in_token_order_kernel)", line)
    if m: name = m.group(1); continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        v = float(m.group(2).replace(",", "")); v = v / 1000 if m.group(1) == "ns" else v * 1000 if m.group(1) == "ms" else v
        c = tot.setdefault(name, [0, 0.0]); c[0] += 1; c[1] += v; name = None
for k, (n, us) in tot.items(): print("  %-26s %4d launches %10.1f us" % (k, n, us))
PY
}
ncu_kernels gemma2_flat 8192 2304 256000 new
ncu_kernels llama3_flat 8192 4096 128256 new
[ $((SECONDS-T0)) -lt 420 ] && ncu_kernels gemma2_flat 8192 2304 256000 main
[ $((SECONDS-T0)) -lt 480 ] && ncu_kernels llama3_flat 8192 4096 128256 main
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call2.tgz call2
