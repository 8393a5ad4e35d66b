#!/usr/bin/env bash
# Session 37, call 7: the host's spans inside cce_run (host_marks2.patch) before and after host_plans.patch, on one
# machine: two builds of the marked C interface (the old tree: host_plans.patch taken back in a copy), then
# marks_driver.py in turns, old, new, old, new, a process each.
T0=$SECONDS
R=$OUT/call7; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
H=$PWD/docs/profiles/session37_h200
for tree in new old; do
  rm -rf /tmp/tree-$tree && mkdir /tmp/tree-$tree && git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C /tmp/tree-$tree
  (cd /tmp/tree-$tree && { [ $tree = new ] || git apply -R $H/host_plans.patch; } && git apply $H/host_marks2.patch) > $R/tree_$tree.log 2>&1 || { echo "patch $tree failed"; cat $R/tree_$tree.log; exit 1; }
  (cmake -S /tmp/tree-$tree -B /tmp/build-m$tree -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-m$tree stage01_materialized cce_capi) > $R/build_$tree.log 2>&1 || { grep -B2 -A8 error $R/build_$tree.log | head -40; exit 1; }
  echo "$tree built at $((SECONDS-T0)) s, counting sort: $(grep -c 'counting sort' /tmp/tree-$tree/stages/09_deterministic_products/deterministic_products.cu)"
done
S1=/tmp/build-mnew/stages/stage01_materialized
[ -f /tmp/cce-inputs/gemma2/c.npy ] || $S1 --n 8192 --d 2304 --v 256000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/cce-inputs/gemma2 --save-large --iters 0 > $R/save_gemma2.log 2>&1
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
for r in 1 2; do
  for tree in old new; do
    timeout 90 python3 $H/marks_driver.py /tmp/build-m$tree/python 2> $R/marks_${tree}_$r.log > /dev/null
    echo "round $r $tree rc $?"
    python3 $H/marks_summary.py $R/marks_${tree}_$r.log $R/marks_${tree}_$r.json > $R/marks_${tree}_$r.txt
  done
done
python3 - $R <<'PY'
import json, sys, statistics
R = sys.argv[1]
runs = {t: [json.load(open("%s/marks_%s_%d.json" % (R, t, r))) for r in (1, 2)] for t in ("old", "new")}
for shape in ("lm32k", "gemma2"):
    for case in ("c_call", "op"):
        print(shape, case)
        spans = runs["new"][0][shape][case].keys() | runs["old"][0][shape][case].keys()
        for span in sorted(spans, key=lambda s: list(runs["old"][0][shape][case]).index(s) if s in runs["old"][0][shape][case] else 99):
            vals = {t: [x[shape][case][span]["median_us"] for x in runs[t] if span in x[shape][case]] for t in runs}
            print("  %-40s old %s  new %s" % (span, " ".join("%7.2f" % v for v in vals["old"]), " ".join("%7.2f" % v for v in vals["new"])))
PY
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call7.tgz call7
