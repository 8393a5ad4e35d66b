#!/usr/bin/env bash
# For a next session (written in session 56, not run): what stage 10's eps choice sees per row and tile at lm128k and
# lm32k, dumped for emulate_orders.py on the CPU (orders of the rows, grids of candidates; no device time after it).
# One H200; after next_quarter_ab.sh on the same warm machine it reuses that training, else it trains (~280 s).
# Run as CCE_COMMIT=<HEAD> bash <this>; the files come back in $OUT/pairs/ (each under 16 MiB).
T0=$SECONDS
R=$OUT/pairs; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
for m in lm32k lm128k; do
  [ -f /tmp/cce-lm-data/$m/e.npy ] || (timeout 420 python3 bench/lm_data.py --out /tmp/cce-lm-data --only $m \
    > $R/lm_data_$m.log 2>&1; echo "lm_data $m rc $? at $((SECONDS-T0)) s") &
done
wait
for m in lm128k lm32k; do
  PYTHONUNBUFFERED=1 timeout $((585 - (SECONDS-T0))) python3 docs/profiles/session56_h200/dump_pairs_probe.py \
    /tmp/cce-lm-data/$m --label $m --out $R >> $R/dump.txt 2>&1
  echo "dump $m rc $? at $((SECONDS-T0)) s"
done
cat $R/dump.txt; ls -la $R
