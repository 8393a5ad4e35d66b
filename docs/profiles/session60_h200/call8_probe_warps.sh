#!/usr/bin/env bash
# Session 60, call 8 (call 7's warm machine): the probe again at llama3's shape, now also with the one-row boxes
# issued by the producer warpgroup's four warps (each announcing its own bytes on the stage's barrier): whether
# call 7's rate is one warp's issue or the SM's TMA unit.
R=$OUT/probe4; mkdir -p $R
nvcc -std=c++17 -O3 -arch=sm_90a -I. docs/profiles/session60_h200/tma_row_gather_probe.cu common/tile/tensor_map.cpp \
  common/check.cpp -lcublas -o /tmp/p4 > $R/build.log 2>&1 || tail $R/build.log
timeout 60 /tmp/p4 > $R/probe_llama3.txt 2>&1; echo rc $?; cat $R/probe_llama3.txt
