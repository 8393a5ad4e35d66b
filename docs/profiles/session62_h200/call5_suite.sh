#!/usr/bin/env bash
# Session 62, call 5 (right after call 4, on its warm machine and /tmp/build): the whole GPU suite on this session's
# last CUDA change (stage 11's release_scratch, the op's one scale launch); stage 11's two-GPU runs skip on one GPU.
T0=$SECONDS
source docs/profiles/device_steps/steps.sh
call_start call5
gpu_suite 560 || exit 1
