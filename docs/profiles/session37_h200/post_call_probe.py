"""Session 37, call 1 (written in session 36 as its call 7): where the op's host time after the C call goes (call 6's split: 0.56 ms at lm32k's shape,
0.93 at gemma2's). Host clocks, a synchronization before each call as the probe's cases: linear_cross_entropy(E, C,
t).backward() with marks at cce_run's start and return, the op's return (after the Function's apply), the Function's
backward entered and left, and .backward()'s return. Medians of 30 after 3 warm-ups. Each shape twice: autograd's
engine as by default (a CUDA graph's backward on the engine's thread for that device, the caller waiting), then under
torch.autograd.set_multithreading_enabled(False) (on the caller's thread): the part of the time that is the hand-over;
then on the engine's thread with Python's garbage collector off (gc.disable()).

    python3 post_call_probe.py BUILD/python OUT.json"""
import gc, json, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

marks = {}
class MarkedLib:
    def __init__(self, real): self.real = real
    def cce_run(self, *a):
        marks["run_start"] = time.perf_counter(); s = self.real.cce_run(*a); marks["run_end"] = time.perf_counter()
        return s
    def cce_scale(self, *a):
        marks.setdefault("scale_start", time.perf_counter()); s = self.real.cce_scale(*a)
        marks["scale_end"] = time.perf_counter(); return s
    def __getattr__(self, k): return getattr(self.real, k)
cs._lib = MarkedLib(cs._lib)
backward = cs._EagerLossAndGrad.backward
def marked_backward(ctx, g):
    marks["bw_enter"] = time.perf_counter(); out = backward(ctx, g); marks["bw_exit"] = time.perf_counter()
    return out
cs._EagerLossAndGrad.backward = staticmethod(marked_backward)

def timed_spans(E, C, t):
    spans = {}
    for rep in range(33):
        E.grad = None; C.grad = None; marks.clear(); torch.cuda.synchronize()
        h0 = time.perf_counter(); loss = cs.linear_cross_entropy(E, C, t); h1 = time.perf_counter()
        loss.backward(); h2 = time.perf_counter(); torch.cuda.synchronize()
        if rep < 3: continue
        m = marks
        for name, a, b in (("before_cce_run", h0, m["run_start"]), ("cce_run", m["run_start"], m["run_end"]),
                           ("run_end_to_op_return", m["run_end"], h1), ("op_return_to_backward_entered", h1, m["bw_enter"]),
                           ("in_Function_backward", m["bw_enter"], m["bw_exit"]),
                           ("scalings", m["scale_start"], m["scale_end"]),
                           ("backward_left_to_return", m["bw_exit"], h2)):
            spans.setdefault(name, []).append((b - a) * 1e6)
    return {k: statistics.median(v) for k, v in spans.items()}

out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "shapes": {}}
for shape, folder in (("lm32k", "/tmp/lm-gen/lm32k"), ("gemma2", "/tmp/cce-inputs/gemma2")):
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    out["shapes"][shape] = {"engine_thread": timed_spans(E, C, t)}
    with torch.autograd.set_multithreading_enabled(False):
        out["shapes"][shape]["caller_thread"] = timed_spans(E, C, t)
    gc.disable()
    out["shapes"][shape]["gc_off"] = timed_spans(E, C, t)
    gc.enable()
    for how, spans in out["shapes"][shape].items():
        print(shape, how, " ".join("%s %.1f us" % kv for kv in spans.items()))
    del e, c, E, C
json.dump(out, open(sys.argv[2], "w"), indent=1)
