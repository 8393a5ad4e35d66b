"""Session 37, call 3: the op before (A: session 36's package, cce_stages_s36/) and after (B: python/cce_stages) the
host path's trims, against the bare C call, in one process on one GPU, the cases taken in turn (40 repetitions after
3 warm-ups each): synchronized (a synchronization, then CUDA events around one call of linear_cross_entropy(E, C,
t).backward()), and queued behind about 0.5 ms of spinning GPU work (torch.cuda._sleep), as a training step queues
the loss behind the model. Medians, min and max of the GPU's time; the host's time to return (median).

    python3 op_ab_probe.py BUILD/python OUT.json"""
import collections, ctypes, json, os, statistics, sys, time
import numpy as np
import torch
here = os.path.dirname(os.path.abspath(__file__))
os.environ["CCE_CAPI_LIBRARY"] = os.path.join(sys.argv[1], "cce_stages", "libcce_capi.so")
sys.path.insert(0, here)
import cce_stages_s36 as A
sys.path.insert(0, sys.argv[1])
import cce_stages as B
assert A is not B and A._lib is not B._lib

def in_turns(cases, reps=40, warm=3):
    for fn, clear in cases.values():
        for _ in range(warm):
            clear(); fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    got = {k: collections.defaultdict(list) for k in cases}
    for _ in range(reps):
        for name, (fn, clear) in cases.items():
            clear(); torch.cuda.synchronize()
            h0 = time.perf_counter(); start.record(); fn(); end.record(); h1 = time.perf_counter()
            end.synchronize()
            got[name]["gpu"].append(start.elapsed_time(end)); got[name]["host"].append((h1 - h0) * 1e3)
    return {k: {"gpu_ms_median": statistics.median(g["gpu"]), "gpu_ms_min": min(g["gpu"]), "gpu_ms_max": max(g["gpu"]),
                "host_ms_median": statistics.median(g["host"])} for k, g in got.items()}

probe = 1_000_000
torch.cuda._sleep(probe)
s_, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s_.record(); torch.cuda._sleep(probe); e_.record(); e_.synchronize()
SLEEP = int(probe * 0.5 / s_.elapsed_time(e_))
out = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "queued_ms": 0.5, "reps": 40, "shapes": {}}
for shape, folder in (("lm32k", "/tmp/lm-gen/lm32k"), ("gemma2", "/tmp/cce-inputs/gemma2")):
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    loss, lse = torch.empty((), device="cuda"), torch.empty(n, device="cuda")
    de, dc, one = torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
    handle = B._stage(0, B.FINAL_STAGE, "")
    problem = B._Problem(n, d, v, 1, 0, 0.0, -100)
    p = lambda x: ctypes.c_void_p(x.data_ptr())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    raw = lambda: B._raise(B._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse),
                                          p(de), p(dc), stream, B._error, B._ERROR_BYTES))
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    def clear():
        E.grad = None; C.grad = None
    op_a = lambda: A.linear_cross_entropy(E, C, t).backward()
    op_b = lambda: B.linear_cross_entropy(E, C, t).backward()
    # the two give the same gradients (B's trims change the host path only)
    clear(); op_a(); ga = (E.grad.clone(), C.grad.clone()); clear(); op_b()
    assert torch.equal(ga[0], E.grad) and torch.equal(ga[1], C.grad), "A and B disagree"
    nothing = lambda: None
    res = out["shapes"][shape] = dict(n=n, d=d, v=v)
    res["synchronized"] = in_turns({"c_call": (raw, nothing), "op_A_s36": (op_a, clear), "op_B": (op_b, clear)})
    ahead = lambda: torch.cuda._sleep(SLEEP)
    behind = lambda fn: (lambda: (ahead(), fn()))
    res["queued"] = in_turns({"ahead_alone": (ahead, nothing), "c_call": (behind(raw), nothing),
                              "op_A_s36": (behind(op_a), clear), "op_B": (behind(op_b), clear)})
    for how in ("synchronized", "queued"):
        r = res[how]
        base = r["c_call"]["gpu_ms_median"] - (r["ahead_alone"]["gpu_ms_median"] if how == "queued" else 0.0)
        for k in ("op_A_s36", "op_B"):
            r[k]["overhead_vs_c_call"] = (r[k]["gpu_ms_median"] - r["c_call"]["gpu_ms_median"]) / base
        print(shape, how, " | ".join("%s %.3f ms (%.3f-%.3f) host %.3f%s" % (
            k, x["gpu_ms_median"], x["gpu_ms_min"], x["gpu_ms_max"], x["host_ms_median"],
            " %+.1f%%" % (100 * x["overhead_vs_c_call"]) if "overhead_vs_c_call" in x else "") for k, x in r.items()),
            flush=True)
    del e, c, E, C, de, dc
json.dump(out, open(sys.argv[2], "w"), indent=1)
