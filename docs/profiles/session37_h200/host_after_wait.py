"""Session 37, call 2: is the host slower right after it waited for the GPU? Call 1's spans after the C call ran 3 to
8 times what the same Python takes hot, and longer at gemma2's shape than at lm32k's. Two fixed workloads, timed
(host clock, median of 30) in states the op's code meets:
  W_py     pure Python (a loop of 300 additions and a dict), no CUDA
  W_torch  tensor metadata and two empty_like allocations (what the op's checks and outputs do)
states: hot (the fifth of five back to back); after torch.cuda.synchronize() with nothing queued; after it waited
for about 1 ms of spinning GPU (torch.cuda._sleep); after time.sleep(1 ms); right after the C call (cs._run) at lm32k's
and gemma2's shapes, with the stage's products still queued. Then call 1's spans of the op at lm32k's shape.

    python3 host_after_wait.py BUILD/python OUT.json SCHED   (SCHED: auto, spin, yield or blocking: the primary
context's scheduling flag, set through the driver before PyTorch makes the context)"""
import ctypes, json, statistics, sys, time
sched = sys.argv[3]
flag = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}[sched]
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
dev = ctypes.c_int()
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxSetFlags_v2(dev, flag) == 0, "cuDevicePrimaryCtxSetFlags"
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs
got_flags, active = ctypes.c_uint(), ctypes.c_int()
cu.cuDevicePrimaryCtxGetState(dev, ctypes.byref(got_flags), ctypes.byref(active))

def load(folder):
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    return e.detach().requires_grad_(True), c.detach().requires_grad_(True), t
shapes = {"lm32k": load("/tmp/lm-gen/lm32k"), "gemma2": load("/tmp/cce-inputs/gemma2")}
E0 = shapes["lm32k"][0]

def w_py():
    d = {}
    s = 0
    for i in range(300):
        s += i
        d[i & 15] = s
    return s
def w_torch():
    x = E0
    for _ in range(4):
        x.dim(); x.shape[1]; x.dtype; x.is_cuda; x.device; x.is_contiguous(); x.data_ptr()
    a = torch.empty_like(x); b = torch.empty_like(x)
    return a, b
def timed(fn):
    h0 = time.perf_counter(); fn(); return (time.perf_counter() - h0) * 1e6
cycles_1ms = None
def calibrate():
    global cycles_1ms
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record(); torch.cuda._sleep(1_000_000); e.record(); e.synchronize()
    cycles_1ms = int(1_000_000 / s.elapsed_time(e))
calibrate()
one = cs._one(E0.get_device()) if "index" in cs._one.__code__.co_varnames else cs._one(E0.device)  # session 37 takes an index
def run_c(shape):
    E, C, t = shapes[shape]
    cs._run(E.detach(), C.detach(), t, one, cs.FINAL_STAGE, "", "mean", -100, 0.0, True)
states = {
    "hot": lambda: [w() for w in (W,) * 4],
    "after_sync_idle": lambda: torch.cuda.synchronize(),
    "after_sync_1ms_gpu": lambda: (torch.cuda._sleep(cycles_1ms), torch.cuda.synchronize()),
    "after_time_sleep_1ms": lambda: time.sleep(0.001),
    "after_c_call_lm32k": lambda: run_c("lm32k"),
    "after_c_call_gemma2": lambda: run_c("gemma2"),
}
out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "sched": sched,
       "primary_ctx_flags": got_flags.value, "workloads": {}}
for wname, W in (("W_py", w_py), ("W_torch", w_torch)):
    res = {}
    for _ in range(3):
        for prep in states.values():
            prep(); W()
    for rep in range(30):
        for name, prep in states.items():
            torch.cuda.synchronize(); prep(); res.setdefault(name, []).append(timed(W))
    out["workloads"][wname] = {k: statistics.median(v) for k, v in res.items()}
    print(sched, wname, " ".join("%s %.1f us" % kv for kv in out["workloads"][wname].items()), flush=True)

marks = {}
class MarkedLib:
    def __init__(self, real): self.real = real
    def cce_run(self, *a):
        marks["run_start"] = time.perf_counter(); s = self.real.cce_run(*a); marks["run_end"] = time.perf_counter()
        return s
    def __getattr__(self, k): return getattr(self.real, k)
cs._lib = MarkedLib(cs._lib)
backward = cs._EagerLossAndGrad.backward
def marked_backward(ctx, g):
    marks["bw_enter"] = time.perf_counter(); r = backward(ctx, g); marks["bw_exit"] = time.perf_counter()
    return r
cs._EagerLossAndGrad.backward = staticmethod(marked_backward)
out["op_spans"] = {}
for shape in ("lm32k", "gemma2"):
    E, C, t = shapes[shape]
    spans = {}
    for rep in range(33):
        E.grad = None; C.grad = None; marks.clear(); torch.cuda.synchronize()
        h0 = time.perf_counter(); loss = cs.linear_cross_entropy(E, C, t); h1 = time.perf_counter()
        loss.backward(); h2 = time.perf_counter(); torch.cuda.synchronize()
        if rep < 3: continue
        m = marks
        for name, a, b in (("before_cce_run", h0, m["run_start"]), ("cce_run", m["run_start"], m["run_end"]),
                           ("run_end_to_op_return", m["run_end"], h1), ("op_return_to_backward_entered", h1, m["bw_enter"]),
                           ("in_Function_backward", m["bw_enter"], m["bw_exit"]), ("backward_left_to_return", m["bw_exit"], h2)):
            spans.setdefault(name, []).append((b - a) * 1e6)
    out["op_spans"][shape] = {k: statistics.median(v) for k, v in spans.items()}
    print(sched, shape, " ".join("%s %.1f us" % kv for kv in out["op_spans"][shape].items()), flush=True)
json.dump(out, open(sys.argv[2], "w"), indent=1)
