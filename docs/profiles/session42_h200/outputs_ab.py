"""Session 42, call 3: the op's two ways of making its outputs, in turns in one process, beside the C call alone
(op_overhead_probe.py's c_call): "asked" (outputs_after_sort.patch: the stage asks for them once its vocabulary's
sort is queued) and "first" (main's way: made before the C call). Built from the patched tree; "first" is its
_run with outputs_when_asked=False. Each repetition takes the three cases in turn, a synchronization before each,
CUDA events around it; then the same queued behind 0.5 ms of spinning GPU work (its own time subtracted).

    python3 outputs_ab.py BUILD/python OUT.json [reps]"""
import ctypes, json, statistics, sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
real_run = cs._run
def outputs_first(*args, **kwargs):
    kwargs["outputs_when_asked"] = False
    return real_run(*args, **kwargs)

def spin_cycles(ms, probe=1_000_000):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(probe); s.record(); torch.cuda._sleep(probe); e.record(); e.synchronize()
    return int(probe * ms / s.elapsed_time(e))
SPIN = spin_cycles(0.5)

out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "reps": REPS, "shapes": {}}
for shape, folder in (("lm32k", "/tmp/lm-gen/lm32k"), ("gemma2", "/tmp/cce-inputs/gemma2")):
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    loss, lse, one = torch.empty((), device="cuda"), torch.empty(n, device="cuda"), torch.ones((), device="cuda")
    de, dc = torch.empty_like(e), torch.empty_like(c)
    stream = torch.cuda.current_stream().cuda_stream
    handle = cs._stage(0, stream, cs.FINAL_STAGE, "")
    problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
    p = lambda x: ctypes.c_void_p(x.data_ptr())
    error = cs._error_buffer()
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    def c_call():
        cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse), p(de),
                                  p(dc), ctypes.c_void_p(stream), error, cs._ERROR_BYTES), error)
    def asked():
        E.grad = C.grad = None
        cs._run = real_run
        cs.linear_cross_entropy(E, C, t).backward()
    def first():
        E.grad = C.grad = None
        cs._run = outputs_first
        try:
            cs.linear_cross_entropy(E, C, t).backward()
        finally:
            cs._run = real_run
    cases = {"c_call": c_call, "asked": asked, "first": first}
    res = {}
    for queued in (False, True):
        times = {k: [] for k in cases}
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for rep in range(REPS + 5):
            for name, fn in cases.items():
                torch.cuda.synchronize()
                start.record()
                if queued:
                    torch.cuda._sleep(SPIN)
                fn(); end.record(); end.synchronize()
                if rep >= 5:
                    times[name].append(start.elapsed_time(end))
        if queued:
            alone = []
            for _ in range(50):
                torch.cuda.synchronize(); start.record(); torch.cuda._sleep(SPIN); end.record(); end.synchronize()
                alone.append(start.elapsed_time(end))
            spin = statistics.median(alone)
            times = {k: [x - spin for x in xs] for k, xs in times.items()}
        summary = {k: {"median_ms": statistics.median(xs), "min_ms": min(xs), "max_ms": max(xs),
                       "q1_ms": statistics.quantiles(xs, n=4)[0], "q3_ms": statistics.quantiles(xs, n=4)[2]}
                   for k, xs in times.items()}
        # the per-repetition differences from the C call of the same repetition: paired, so drifts cancel
        for k in ("asked", "first"):
            diffs = [a - b for a, b in zip(times[k], times["c_call"])]
            summary[k]["minus_c_call_us_median"] = 1e3 * statistics.median(diffs)
        res["queued" if queued else "synchronized"] = summary
        cc = summary["c_call"]["median_ms"]
        print("%s %s: C call %.3f ms; asked %+.1f%% (%.0f us paired); first %+.1f%% (%.0f us paired)" % (
            shape, "queued" if queued else "synchronized", cc,
            100 * (summary["asked"]["median_ms"] / cc - 1), summary["asked"]["minus_c_call_us_median"],
            100 * (summary["first"]["median_ms"] / cc - 1), summary["first"]["minus_c_call_us_median"]), flush=True)
    out["shapes"][shape] = dict(n=n, d=d, v=v, **res)
json.dump(out, open(sys.argv[2], "w"), indent=1)
