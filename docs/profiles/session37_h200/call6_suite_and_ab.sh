#!/usr/bin/env bash
# Session 37, call 6: the tree of 82e9be4 (host_plans.patch over f304af4) built whole, the whole GPU suite, then
# cce_bench in turns against f304af4's (the patch taken back in a copy): three rounds, each a process of the old
# build then one of the new, stage 10 and the floor's loss + gradient at lm32k's shape (realistic generator, the
# op probes' files) and gemma2, 50 calls each.
T0=$SECONDS
R=$OUT/call6; mkdir -p $R /tmp/cce-inputs /tmp/lm-gen
nvidia-smi -L > $R/gpu.txt; git rev-parse HEAD > $R/commit.txt; git status --short > $R/status.txt
P=docs/profiles/session37_h200/host_plans.patch
rm -rf /tmp/old-tree && mkdir /tmp/old-tree && git ls-files -co --exclude-standard | tar cf - -T - | tar xf - -C /tmp/old-tree
(cd /tmp/old-tree && git apply -R --unsafe-paths $OLDPWD/$P 2>&1 || patch -R -p1 < $OLDPWD/$P) > $R/old_tree.log 2>&1
grep -c "counting sort" /tmp/old-tree/stages/09_deterministic_products/deterministic_products.cu >> $R/old_tree.log
(cmake -S . -B /tmp/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build) > $R/build.log 2>&1 || { grep -B2 -A8 error $R/build.log | head -40; exit 1; }
echo "build $((SECONDS-T0)) s"
(cmake -S /tmp/old-tree -B /tmp/build-old -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && ninja -C /tmp/build-old cce_bench) > $R/build_old.log 2>&1 || { grep -B2 -A8 error $R/build_old.log | head -40; exit 1; }
echo "old build $((SECONDS-T0)) s"; cat $R/old_tree.log
(cd /tmp/build && ctest -L "gpu|stage" -j4 --timeout 300) > $R/ctest_gpu.log 2>&1
echo "suite rc $? at $((SECONDS-T0)) s"; grep -E "tests passed|tests failed|Total Test" $R/ctest_gpu.log; grep -E "\*\*\*Failed|\(Failed\)|Timeout" $R/ctest_gpu.log | head
S1=/tmp/build/stages/stage01_materialized
[ -f /tmp/lm-gen/lm32k/c.npy ] || $S1 --n 8192 --d 768 --v 32000 --dtype bf16 --data realistic --seed 1234 \
  --save /tmp/lm-gen/lm32k --save-large --iters 0 > $R/save_lm32k.log 2>&1
F='^(stage10_plan_per_batch|cublas_floor)/loss_grad/'
for r in 1 2 3; do
  for tree in old new; do
    B=/tmp/build; [ $tree = old ] && B=/tmp/build-old
    timeout 60 $B/bench/cce_bench --shapes=lm32k,gemma2 --lm-data=/tmp/lm-gen --calls=50 --benchmark_filter="$F" \
      --benchmark_out=$R/bench_${tree}_$r.json --benchmark_out_format=json > $R/bench_${tree}_$r.txt 2>&1
    echo "round $r $tree rc $?"
  done
done
python3 - $R <<'PY'
import json, sys, glob, statistics
R = sys.argv[1]
rows = {}
for f in sorted(glob.glob(R + "/bench_*_*.json")):
    tree, rnd = f.split("/")[-1][6:-5].split("_")
    for b in json.load(open(f))["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") == "median":
            rows.setdefault(b["run_name"].split("/iterations")[0], {}).setdefault(tree, []).append(b["real_time"])
for k, v in sorted(rows.items()):
    print(k, " ".join("%s %s" % (t, " ".join("%.3f" % x for x in v[t])) for t in ("old", "new") if t in v))
PY
echo "total $((SECONDS-T0)) s"
cd $OUT && tar czf call6.tgz call6
