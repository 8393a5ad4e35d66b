#!/usr/bin/env python3
"""Where one call of the final stage spends its GPU time: a torch.profiler trace of stage 10's C interface
(loss and gradient, the caller's buffers allocated once, as python/op_overhead_probe.py's c_call), each GPU
operation with its start, the idle time before it and its duration, then the operations summed by name.

    python3 bench/stage_timeline.py BUILD/python INPUTS_DIR [INPUTS_DIR ...] [--calls 5] [--out OUT.txt]

Each INPUTS_DIR holds e.npy, c.npy, targets.npy (stage 01's --save, as bench/peers.py writes them). The calls
before the last one warm up (the plan of a batch follows the batch before); the last one is traced. The
profiler's own overhead lengthens the host's part, so the idle times are upper bounds."""
import argparse
import collections
import ctypes
import json
import os
import re
import sys
import tempfile

import numpy as np
import torch


def trace_one_call(cs, folder, calls):
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

    def call():
        cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse), p(de),
                                  p(dc), stream, cs._error, cs._ERROR_BYTES))

    for _ in range(calls - 1):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
    gpu = sorted((ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")),
                 key=lambda ev: ev["ts"])
    st = cs._Stats()
    if cs._lib.cce_last_stats(handle, stream, ctypes.byref(st), cs._error, cs._ERROR_BYTES) != 0:
        raise RuntimeError("cce_last_stats: " + cs._error.value.decode())
    stats = ({0: "sparse", 1: "dense"}.get(st.plan), st.kept_units / st.units if st.units > 0 else None) \
        if st.has_stats else (None, None)
    del e, c, t, de, dc
    cs.release_scratch()
    torch.cuda.empty_cache()
    return (n, d, v), gpu, stats


def report(shape_name, dims, gpu, stats):
    plan, kept = stats
    lines = ["== %s: N=%d D=%d V=%d, plan %s, kept share of the (token block, tile) pairs %s"
             % ((shape_name,) + tuple(dims) + (plan, "%.4f" % kept if kept is not None else None))]
    if not gpu:
        return lines + ["no GPU operations traced"]
    t0, end, busy = gpu[0]["ts"], gpu[0]["ts"], 0.0
    by_name = collections.OrderedDict()
    for ev in gpu:
        idle = max(0.0, ev["ts"] - end)
        lines.append("+%8.0f idle %7.1f dur %8.1f  %s" % (ev["ts"] - t0, idle, ev["dur"], ev["name"][:110]))
        end, busy = max(end, ev["ts"] + ev["dur"]), busy + ev["dur"]
        key = re.split(r"[(<]", ev["name"].replace("(anonymous namespace)::", "").replace("void ", ""))[0][:90]
        s = by_name.setdefault(key, [0, 0.0, 0.0])
        s[0] += 1
        s[1] += ev["dur"]
        s[2] += idle
    span = end - t0
    lines.append("span %.0f us, operations %d, their durations summed %.0f us (side streams overlap)" % (span, len(gpu), busy))
    lines.append("by name (count, us, idle before them us), longest first:")
    for key, (count, dur, idle) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        lines.append("  %4d %9.1f %8.1f  %s" % (count, dur, idle, key))
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("python_dir")
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.calls < 1:
        ap.error("--calls must be >= 1")
    for folder in a.inputs:
        if not all(os.path.isfile(os.path.join(folder, f)) for f in ("e.npy", "c.npy", "targets.npy")):
            ap.error("%s lacks e.npy, c.npy or targets.npy" % folder)
    sys.path.insert(0, a.python_dir)
    import cce_stages as cs
    out = ["stage %s through its C interface, on %s, torch %s" % (cs.FINAL_STAGE, torch.cuda.get_device_name(0),
                                                                 torch.__version__)]
    for folder in a.inputs:
        dims, gpu, stats = trace_one_call(cs, folder, a.calls)
        out += report(os.path.basename(os.path.normpath(folder)), dims, gpu, stats)
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
