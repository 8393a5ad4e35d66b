#!/usr/bin/env bash
# Session 60, call 7 (a fresh machine; about 11 s of commands): builds
# tma_row_gather_probe.cu with nvcc alone and runs it at llama3's, gemma2's and lm128k's shapes. Run as
# CCE_COMMIT=<HEAD> bash <this>. Each line it prints is the probe's; rc 1 where the one-row boxes do not land as
# the 256-row box's bytes (then a gathered forward would need its own swizzle: cp.async, not TMA).
R=$OUT/probe; mkdir -p $R
{ echo "CCE_COMMIT=$CCE_COMMIT"; git log --oneline -1; nvidia-smi -L; } > $R/status.txt 2>&1
nvcc -std=c++17 -O3 -arch=sm_90a -I. docs/profiles/session60_h200/tma_row_gather_probe.cu common/tile/tensor_map.cpp \
  common/check.cpp -lcublas -o /tmp/tma_row_gather_probe > $R/build.log 2>&1 || { tail -20 $R/build.log; exit 1; }
for s in "llama3 8192 4096 128256" "gemma2 8192 2304 256000" "lm128k 8192 2048 128000"; do
  set -- $s
  timeout 60 /tmp/tma_row_gather_probe $2 $3 $4 > $R/probe_$1.txt 2>&1
  echo "$1 rc $?"; cat $R/probe_$1.txt
done
