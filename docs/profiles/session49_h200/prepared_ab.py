"""Session 49: would the op's outputs, made for the next call after the C call returns (while the GPU runs the
stage), take the cold allocation out of the synchronized call's prefix, or does the cold host cost move to the next
step? In turns in one process, a synchronization before each case, CUDA events around it (op_overhead_probe.py's
way): c_call (cce_run by ctypes, outputs made once), op (the package's linear_cross_entropy(...).backward()), and
op_prepared (the same with _run replaced by a copy that takes outputs made by the previous call and makes the next
call's after its C call). Then the same queued behind 0.5 ms of spinning GPU work (its time subtracted).

    python3 prepared_ab.py BUILD/python OUT.json [reps]"""
import contextlib, ctypes, json, statistics, sys
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

REPS = int(sys.argv[3]) if len(sys.argv) > 3 else 200
real_run = cs._run
_prepared = {}

def prepared_run(e, c, targets, upstream, stage, flags, reduction, ignore_index, softcap, with_grad, with_dc=True):
    """cs._run with its outputs taken from the previous call's preparation (the experiment; not the package's)."""
    if not (e.is_contiguous() and c.is_contiguous() and targets.is_contiguous()):
        e, c, targets = e.contiguous(), c.contiguous(), targets.contiguous()
    n, v = e.shape[0], c.shape[0]
    key = (e.shape, c.shape, e.dtype, e.get_device(), reduction == "none", with_grad, with_dc)
    outs = _prepared.pop(key, None)
    def make():
        return (e.new_empty((n,) if reduction == "none" else (), dtype=torch.float32),
                torch.empty_like(e) if with_grad else None, torch.empty_like(c) if with_grad and with_dc else None)
    loss, de, dc = outs if outs is not None else make()
    problem = cs._problem(n, e.shape[1], v, e.dtype, reduction, softcap, ignore_index)
    index = e.get_device()
    error = cs._error_buffer()
    with cs._on_device(index):
        stream = cs._raw_stream(index)
        with cs._device_lock(index):
            handle = cs._stage(index, stream, stage, flags)
            status = cs._lib.cce_run(handle, ctypes.byref(problem), e.data_ptr(), c.data_ptr(), targets.data_ptr(),
                                     upstream.data_ptr() if with_grad else None, loss.data_ptr(), None,
                                     de.data_ptr() if de is not None else None, dc.data_ptr() if dc is not None else None,
                                     stream, error, cs._ERROR_BYTES)
            if with_grad and status == 0:
                cs._backward_ran.add((index, stage, flags))
    cs._raise(status, error)
    _prepared[key] = make()  # the next call's, while the GPU runs this one
    return loss, de, dc

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
    def op():
        E.grad = C.grad = None
        cs.linear_cross_entropy(E, C, t).backward()
    def op_prepared():
        E.grad = C.grad = None
        cs._run = prepared_run
        try:
            cs.linear_cross_entropy(E, C, t).backward()
        finally:
            cs._run = real_run
    cases = {"c_call": c_call, "op": op, "op_prepared": op_prepared}
    # the same bits both ways (one call each, compared)
    E.grad = C.grad = None; l1 = cs.linear_cross_entropy(E, C, t); l1.backward(); g1 = (E.grad.clone(), C.grad.clone())
    E.grad = C.grad = None; cs._run = prepared_run; l2 = cs.linear_cross_entropy(E, C, t); l2.backward(); cs._run = real_run
    same = bool(torch.equal(l1, l2) and torch.equal(g1[0], E.grad) and torch.equal(g1[1], C.grad))
    assert same, "prepared outputs changed the results"
    res = {"same_bits": same}
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
        summary = {k: {"median_ms": statistics.median(xs), "min_ms": min(xs), "max_ms": max(xs)} for k, xs in times.items()}
        for k in ("op", "op_prepared"):  # paired with the same repetition's C call: drifts cancel
            summary[k]["minus_c_call_us_median"] = 1e3 * statistics.median([a - b for a, b in zip(times[k], times["c_call"])])
        res["queued" if queued else "synchronized"] = summary
        cc = summary["c_call"]["median_ms"]
        print("%s %s: C call %.3f ms (%.3f-%.3f); op %+.1f%% (%.0f us paired); prepared %+.1f%% (%.0f us paired)" % (
            shape, "queued" if queued else "synchronized", cc, summary["c_call"]["min_ms"], summary["c_call"]["max_ms"],
            100 * (summary["op"]["median_ms"] / cc - 1), summary["op"]["minus_c_call_us_median"],
            100 * (summary["op_prepared"]["median_ms"] / cc - 1), summary["op_prepared"]["minus_c_call_us_median"]),
            flush=True)
    out["shapes"][shape] = dict(n=n, d=d, v=v, **res)
    _prepared.clear()
json.dump(out, open(sys.argv[2], "w"), indent=1)
