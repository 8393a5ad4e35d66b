"""Session 38: what a synchronized call's first host steps cost after the stage's C call, at lm32k's shape. Each
step timed on the host (median of 30 after 3 warm-ups) four ways: cold (a synchronization, the bare C call, a
synchronization, then the step, as the op's Python runs in a synchronized call), after a wait alone (1.5 ms of a
spinning kernel, then a synchronization: no host code of the stage), after a synchronization alone (no wait), and
hot (right after the same step). Then the GPU's view: CUDA events around the bare C call, the op's forward
through the C++ call (torch.ops.cce_stages_eager) and the same forward through the Python path (cce_stages._run),
each after a synchronization, in turns.

    python3 cold_steps.py BUILD/python OUT.json"""
import ctypes, json, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

e = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/e.npy")).cuda().bfloat16()
c = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/c.npy")).cuda().bfloat16()
t = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/targets.npy")).cuda().long()
n, d, v = e.shape[0], e.shape[1], c.shape[0]
handle = cs._stage(0, cs.FINAL_STAGE, "")
problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
loss, de, dc, one = torch.empty((), device="cuda"), torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
args = (handle, ctypes.byref(problem), e.data_ptr(), c.data_ptr(), t.data_ptr(), one.data_ptr(), loss.data_ptr(), None,
        de.data_ptr(), dc.data_ptr(), torch.cuda.current_stream().cuda_stream, cs._error, cs._ERROR_BYTES)
raw = lambda: cs._raise(cs._lib.cce_run(*args))
dev = e.device
steps = {
    "python_loop_300": lambda: sum(range(300)),
    "attribute_reads_10": lambda: (e.shape, e.dtype, e.is_contiguous(), e.get_device(), e.requires_grad, c.shape,
                                   c.dtype, c.is_contiguous(), t.dtype, t.shape),
    "raw_stream": lambda: cs._raw_stream(0),
    "empty_scalar": lambda: torch.empty((), device=dev),
    "empty_like_de": lambda: torch.empty_like(e),
    "empty_like_dc": lambda: torch.empty_like(c),
    "caching_allocator_4_bytes": lambda: torch.cuda.caching_allocator_delete(torch.cuda.caching_allocator_alloc(4)),
    "three_outputs": lambda: (torch.empty((), device=dev), torch.empty_like(e), torch.empty_like(c)),
    "is_grad_enabled": torch.is_grad_enabled,
    "stage_lookup": lambda: cs._stage(0, cs.FINAL_STAGE, ""),
}
def timed(fn, before, reps=30, warm=3):
    got = []
    for r in range(reps + warm):
        before()
        h0 = time.perf_counter(); fn(); h1 = time.perf_counter()
        if r >= warm:
            got.append((h1 - h0) * 1e6)
    return statistics.median(got)
cold_before = lambda: (torch.cuda.synchronize(), raw(), torch.cuda.synchronize())
def sleep_cycles(ms, probe=1_000_000):
    torch.cuda._sleep(probe)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(); torch.cuda._sleep(probe); end.record(); end.synchronize()
    return int(probe * ms / start.elapsed_time(end))
WAIT = sleep_cycles(1.5)
wait_before = lambda: (torch.cuda.synchronize(), torch.cuda._sleep(WAIT), torch.cuda.synchronize())
out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "host_us": {}}
for name, fn in steps.items():
    out["host_us"][name] = {"cold": timed(fn, cold_before), "after_wait": timed(fn, wait_before),
                            "after_sync": timed(fn, torch.cuda.synchronize), "hot": timed(fn, fn)}
    print(name, " ".join("%s %.1f" % kv for kv in out["host_us"][name].items()), flush=True)
op = getattr(cs, "_eager_op", None)  # eager_call_cpp.patch's C++ call, where applied and built
cases = {"c_call": raw,
         "python_path_forward": lambda: cs._run(e, c, t, cs._one(0), cs.FINAL_STAGE, "", "mean", -100, 0.0, True)}
if op is not None:
    cases["cpp_call_forward"] = lambda: op(e, c, t, handle, 0, -100, 0.0, True)
start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
gpu = {k: [] for k in cases}
for r in range(33):
    for name, fn in cases.items():
        torch.cuda.synchronize(); start.record(); fn(); end.record(); end.synchronize()
        if r >= 3:
            gpu[name].append(start.elapsed_time(end) * 1e3)
out["gpu_us"] = {k: {"median": statistics.median(x), "min": min(x), "max": max(x)} for k, x in gpu.items()}
print("gpu", " ".join("%s %.1f" % (k, x["median"]) for k, x in out["gpu_us"].items()), flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
