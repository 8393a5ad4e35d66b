#!/usr/bin/env bash
# Session 65, call 3 (the machine of call 2, warm; CCE_COMMIT=<HEAD> bash <this>): call 2's text output has no source
# lines, so one launch of stage 10's forward kernel at gemma2's shape is saved as a report (SourceCounters and
# WarpStateStats, sources imported) and its SASS page exported; stall_lines.py keeps the 40 instructions with the most
# stall samples, each with its address and SASS (the export holds no CUDA lines).
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call3
[ -x /tmp/build-lines/stages/stage10_plan_per_batch ] || { echo "no -lineinfo build here (a fresh machine)"; exit 1; }
timeout 120 ncu --section WarpStateStats --section SourceCounters --import-source yes -k regex:wgmma_pipeline_kernel \
  -c 1 -o /tmp/stalls_gemma2 -f /tmp/build-lines/stages/stage10_plan_per_batch --n 8192 --d 2304 --v 256000 \
  --dtype bf16 --data realistic --seed 1234 --backward --iters 0 > $R/ncu_run.txt 2>&1
echo "ncu rc $? ($((SECONDS-T0)) s)"
timeout 120 ncu -i /tmp/stalls_gemma2.ncu-rep --page source --csv --print-source sass > /tmp/source_sass.csv 2> $R/export.err
echo "export rc $? ($((SECONDS-T0)) s), $(wc -l < /tmp/source_sass.csv) lines"
head -3 /tmp/source_sass.csv | cut -c1-600 > $R/source_head.txt
python3 docs/profiles/session65_h200/stall_lines.py /tmp/source_sass.csv > $R/stall_lines.txt 2>&1
echo "stall_lines rc $?"; head -50 $R/stall_lines.txt
cd $OUT && tar czf call3.tgz call3 && rm -rf call3
