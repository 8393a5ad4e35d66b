"""Written in session 37, run in session 38 (its call 1, docs/profiles/session38_h200/): where the op's 73-100 us of Python before the C call go
at lm32k's shape (README.md, "Next" 1). linear_cross_entropy's eager path for mean with a gradient, step by step as
python/cce_stages does it, a host clock at each step; a synchronization, then one C call at lm32k's shape (so that
the Python runs as cold as in the op) before each of 33 repetitions (3 warm-ups). Then the outputs' allocation in
three other ways, cold the same way: torch.empty with shapes, one uint8 buffer cut into three views, and nothing
(outputs made once). Medians in us.

    python3 prefix_steps.py BUILD/python OUT.json"""
import ctypes, json, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

e = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/e.npy")).cuda().bfloat16()
c = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/c.npy")).cuda().bfloat16()
t = torch.from_numpy(np.load("/tmp/lm-gen/lm32k/targets.npy")).cuda().long()
E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
one = cs._one(e.get_device())

def c_call():  # the stage through the op's _run, to leave the host as the op's C call leaves it
    cs._run(e, c, t, one, cs.FINAL_STAGE, "", "mean", -100, 0.0, True)

def steps():
    m = [("start", time.perf_counter())]
    mark = lambda name: m.append((name, time.perf_counter()))
    cs._check(E, C, t, "mean"); mark("check")
    wants = torch.is_grad_enabled() and (E.requires_grad or C.requires_grad) and cs._eager(E, C, t); mark("eager_test")
    index = E.get_device(); up = cs._one(index); mark("ones")
    ok = E.is_contiguous() and C.is_contiguous() and t.is_contiguous(); mark("contiguity")
    loss = E.new_empty((), dtype=torch.float32); mark("alloc_loss")
    de = torch.empty_like(E); mark("alloc_de")
    dc = torch.empty_like(C); mark("alloc_dc")
    problem = cs._problem(E.shape[0], E.shape[1], C.shape[0], E.dtype, "mean", 0.0, -100); mark("problem")
    with cs._on_device(index):
        handle = cs._stage(index, cs.FINAL_STAGE, ""); mark("device_and_stage")
        args = (handle, ctypes.byref(problem), E.data_ptr(), C.data_ptr(), t.data_ptr(), up.data_ptr(), loss.data_ptr(),
                None, de.data_ptr(), dc.data_ptr(), cs._raw_stream(index), cs._error, cs._ERROR_BYTES)
        mark("arguments")
    return m, (wants, ok, args)

def alloc_shapes():
    return (torch.empty((), device=e.device, dtype=torch.float32), torch.empty(e.shape, device=e.device, dtype=e.dtype),
            torch.empty(c.shape, device=e.device, dtype=e.dtype))
def alloc_one_buffer():
    n_de, n_dc = e.numel() * 2, c.numel() * 2
    raw = torch.empty(256 + n_de + n_dc, device=e.device, dtype=torch.uint8)
    return (raw[:4].view(torch.float32).view(()), raw[256:256 + n_de].view(torch.bfloat16).view(e.shape),
            raw[256 + n_de:].view(torch.bfloat16).view(c.shape))
def alloc_like():
    return E.new_empty((), dtype=torch.float32), torch.empty_like(E), torch.empty_like(C)

out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "steps_us": {}, "allocations_us": {}}
spans = {}
for rep in range(33):
    torch.cuda.synchronize(); c_call(); torch.cuda.synchronize()
    m, _ = steps()
    if rep >= 3:
        for (a, ta), (b, tb) in zip(m, m[1:]):
            spans.setdefault(b, []).append((tb - ta) * 1e6)
        spans.setdefault("total", []).append((m[-1][1] - m[0][1]) * 1e6)
out["steps_us"] = {k: statistics.median(v) for k, v in spans.items()}
print("steps", " ".join("%s %.1f" % kv for kv in out["steps_us"].items()), flush=True)
ways = {"like (the op's)": alloc_like, "with shapes": alloc_shapes, "one buffer, three views": alloc_one_buffer}
got = {k: [] for k in ways}
for rep in range(33):
    for name, fn in ways.items():
        torch.cuda.synchronize(); c_call(); torch.cuda.synchronize()
        h0 = time.perf_counter(); fn(); h1 = time.perf_counter()
        if rep >= 3:
            got[name].append((h1 - h0) * 1e6)
out["allocations_us"] = {k: statistics.median(v) for k, v in got.items()}
print("allocations", " ".join("%s %.1f" % kv for kv in out["allocations_us"].items()), flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
