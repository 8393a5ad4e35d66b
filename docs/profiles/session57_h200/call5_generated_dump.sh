#!/usr/bin/env bash
# Session 57, call 5, right after call 4 on the same warm machine (its build in /tmp/build; run as given inline then,
# written down here): the generated shapes' inputs saved by stage 01 (llama3, gemma2, gpt2; seed 1234, as cce_bench
# makes them) and session 56's dump_pairs_probe.py on each, for emulate_grouping.py on the CPU. gemma2's bound file
# did not come back (23 MB, over 16 MiB); gpt2's and llama3's did, beside the archive of the *_pairs files.
T0=$SECONDS; R=$OUT/gen; mkdir -p $R /tmp/cce-inputs
for s in "llama3 8192 4096 128256" "gemma2 8192 2304 256000" "gpt2 20480 768 50257"; do
  set -- $s
  timeout 100 /tmp/build/stages/stage01_materialized --n $2 --d $3 --v $4 --dtype bf16 --data realistic --seed 1234 \
    --save /tmp/cce-inputs/$1 --save-large --iters 0 > $R/save_$1.log 2>&1 || echo "save $1 failed"
  echo "saved $1 at $((SECONDS-T0))"
  PYTHONUNBUFFERED=1 timeout 120 python3 docs/profiles/session56_h200/dump_pairs_probe.py /tmp/cce-inputs/$1 --label $1 \
    --out $R >> $R/dump.txt 2>&1
  echo "dump $1 rc $? at $((SECONDS-T0)) s"
done
tail -5 $R/dump.txt; ls -la $R
cd $OUT && tar czf gen_pairs.tgz gen/*_pairs.* gen/dump.txt && ls -la gen_pairs.tgz
