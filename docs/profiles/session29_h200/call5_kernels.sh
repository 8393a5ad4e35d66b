#!/usr/bin/env bash
# Session 29, call 5 (the same warm machine): QuACK, stage 10's op and torch.compile at lm128k_s0, five calls each
# under torch.profiler with 10 ms of GPU spin and a synchronization between calls; CUDA time summed per kernel.
export PYTHONPATH=/tmp/site:/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages; mkdir -p $OUT/c5; timeout 300 python3 - > $OUT/c5/kernels_lm128k_s0.txt 2>&1 <<'PY'
import sys; sys.path.insert(0, 'bench'); import peers, torch
import torch.nn.functional as F
funcs, sk = peers.peer_functions(torch, F, print, '/tmp/build/python')
folder = '/tmp/cce-lm-data/lm128k_s0'
dims = peers.lm_shape_dims(folder)
e, c, t = peers.load_inputs(torch, folder, dims)
print(torch.cuda.get_device_name(), dims)
for impl in ['peer_quack', 'stage10_plan_per_batch_op', 'peer_torch_compile']:
    fn = peers.make_case_function(torch, F, funcs, impl, None)
    case = peers.PreparedCase(torch, fn, e, c, t, 'loss_grad')
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            case.clear(); case.step(); torch.cuda.synchronize()
            torch.cuda._sleep(20_000_000); torch.cuda.synchronize()
    print('==', impl, '(5 calls, 10 ms idle between)')
    print(prof.key_averages().table(sort_by='cuda_time_total', row_limit=14, max_name_column_width=110))
    del case, fn; torch.cuda.empty_cache()
PY
echo rc $?; grep -E "^==|Self CUDA time total" $OUT/c5/kernels_lm128k_s0.txt
