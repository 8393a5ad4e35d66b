"""Is the dense plan's loss + grad longer than its GPU span? The C interface (cce_run, buffers allocated once) at
each INPUTS folder, timed as cce_bench and peers.py time a call (a synchronization, then CUDA events around one
call; median, min, max of 20 after 3 warm-ups), and again queued behind about QUEUED_MS of spinning GPU work, so that
host work before the first kernel overlaps the spin: call = queued - ahead_alone; and
alone, back to back (as cce_bench), and with 10 ms of idle GPU after each call. host_ms: the host's time in the call.

    python3 docs/profiles/session28_h200/dense_gap_probe.py BUILD/python OUT.json INPUTS_DIR [INPUTS_DIR ...]"""
import ctypes, json, os, statistics, sys, time
import numpy as np
import torch
sys.path.insert(0, sys.argv[1])
import cce_stages as cs

QUEUED_MS = 8.0

def timed(cases, reps=20, warm=3, idle_s=0.0):
    for fn in cases.values():
        for _ in range(warm):
            fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    gpu, host = {k: [] for k in cases}, {k: [] for k in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            torch.cuda.synchronize()
            h0 = time.perf_counter(); start.record(); fn(); end.record(); h1 = time.perf_counter()
            end.synchronize()
            if idle_s:
                time.sleep(idle_s)  # the GPU idles: its clocks and power recover between calls
            gpu[name].append(start.elapsed_time(end)); host[name].append((h1 - h0) * 1e3)
    return {k: {"gpu_ms_median": statistics.median(gpu[k]), "gpu_ms_min": min(gpu[k]), "gpu_ms_max": max(gpu[k]),
                "host_ms_median": statistics.median(host[k])} for k in cases}

torch.cuda._sleep(1_000_000)
s, e_ = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record(); torch.cuda._sleep(1_000_000); e_.record(); e_.synchronize()
cycles = int(1_000_000 * QUEUED_MS / s.elapsed_time(e_))
out = {"gpu": torch.cuda.get_device_name(0), "queued_ms": QUEUED_MS, "shapes": {}}
for folder in sys.argv[3:]:
    e = torch.from_numpy(np.load(folder + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(folder + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(folder + "/targets.npy")).cuda().long()
    n, d, v = e.shape[0], e.shape[1], c.shape[0]
    loss, lse = torch.empty((), device="cuda"), torch.empty(n, device="cuda")
    de, dc, one = torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
    handle = cs._stage(0, cs.FINAL_STAGE, "")
    problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
    p = lambda x: ctypes.c_void_p(x.data_ptr())
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    raw = lambda: cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse),
                                            p(de), p(dc), stream, cs._error, cs._ERROR_BYTES))
    ahead = lambda: torch.cuda._sleep(cycles)
    res = {"back_to_back": timed({"c_call": raw})["c_call"],
           "idle_10ms_between": timed({"c_call": raw}, idle_s=0.010)["c_call"]}
    res.update(timed({"c_call": raw, "ahead_alone": ahead, "queued": lambda: (ahead(), raw())}))
    res.update({"back_to_back_again": timed({"c_call": raw})["c_call"]})
    res["queued_minus_ahead_ms"] = res["queued"]["gpu_ms_median"] - res["ahead_alone"]["gpu_ms_median"]
    out["shapes"][os.path.basename(folder)] = dict(n=n, d=d, v=v, **res)
    print(os.path.basename(folder), json.dumps(out["shapes"][os.path.basename(folder)]), flush=True)
    del e, c, t, de, dc
    cs.release_scratch(); torch.cuda.empty_cache()
json.dump(out, open(sys.argv[2], "w"), indent=1)
