"""The op's Python cost per call with the C call replaced by a no-op, at lm32k's shape (python/WORKLOG.md):

    python3 python/op_python_cost.py build/python

prints the mean host time per call of each piece over 2000 calls; the GPU work they queue is not waited for."""
import sys, time
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs
n, d, v = 8192, 768, 32000
e = torch.randn(n, d, device="cuda", dtype=torch.bfloat16); c = torch.randn(v, d, device="cuda", dtype=torch.bfloat16)
t = torch.randint(0, v, (n,), device="cuda")
E, C = e.clone().requires_grad_(True), c.clone().requires_grad_(True)
def per_call(fn, reps=2000):
    for _ in range(50): fn()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(reps): fn()
    t1 = time.perf_counter(); torch.cuda.synchronize()
    return (t1 - t0) / reps * 1e6
class FakeLib:
    def __init__(self, real): self.real = real
    def cce_run(self, *a): return 0
    def cce_scale(self, *a): return 0
    def __getattr__(self, k): return getattr(self.real, k)
real = cs._lib
cs._lib = FakeLib(real)
one = torch.ones((), device="cuda")
rows = {
 "check": lambda: cs._check(E, C, t, "mean"),
 "eager test": lambda: cs._eager(E, C, t),
 "4 torch.empty": lambda: (torch.empty((), device=e.device, dtype=torch.float32), torch.empty((n,), device=e.device, dtype=torch.float32), torch.empty_like(e), torch.empty_like(c)),
 "_run (C call a no-op)": lambda: cs._run(e, c, t, one, cs.FINAL_STAGE, "", "mean", -100, 0.0, True),
 "linear_cross_entropy fwd (no-op C)": lambda: cs.linear_cross_entropy(E, C, t),
 "fwd + backward (no-op C)": lambda: cs.linear_cross_entropy(E, C, t).backward(),
 "raw stream": lambda: cs._raw_stream(0),
 "current_device": lambda: torch.cuda.current_device(),
 "is_compiling": lambda: torch.compiler.is_compiling(),
 "ones_like+backward of a trivial graph": lambda: (E.sum() * 0).backward(),
}
for k, f in rows.items():
    print("%-40s %7.1f us" % (k, per_call(f)), flush=True)
    E.grad = None; C.grad = None
