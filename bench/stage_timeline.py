#!/usr/bin/env python3
"""Where one call of the final stage spends its GPU time: a torch.profiler trace of stage 10's C interface
(loss and gradient, the caller's buffers allocated once, as python/op_overhead_probe.py's c_call), each GPU
operation with its start, the idle time before it and its duration, then the operations summed by name.

    python3 bench/stage_timeline.py BUILD/python INPUTS_DIR [INPUTS_DIR ...] [--calls 5] [--host] [--through op]
                                    [--out OUT.txt]

Each INPUTS_DIR holds e.npy, c.npy, targets.npy (stage 01's --save, as bench/peers.py writes them). The calls
before the last one warm up (the plan of a batch follows the batch before); the last one is traced. The
profiler's own overhead lengthens the host's part, so the idle times are upper bounds. Operations on a side
stream overlap the main stream's: the idle time before an operation counts from the end of every operation
that started before it. With --host, the host's CUDA API calls of the same call follow, each with the host's own
time before it (its C++ code between calls) and its duration (a synchronizing call waits for the GPU in it), then
each wait of the GPU of 10 us or more: when the host queued the operation after it, and what the host did meanwhile.
With --through op, the traced call is the PyTorch op instead, as bench/peers.py times it (E and C leaves with
requires_grad, their .grad cleared, then linear_cross_entropy(E, C, t).backward()): the GPU and the host of the op's
whole call, its Python and autograd included, to set beside the C interface's (issue 26's overhead).
Exit status 2 for bad arguments, 77 (skipped) without PyTorch or a CUDA device."""
import argparse
import collections
import ctypes
import json
import os
import re
import sys
import tempfile

from peers import EXIT_SKIPPED, check_probe_args, lm_shape_dims, load_inputs, torch_and_stages  # as peers.py reads them

GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")
HOST_CATEGORIES = ("cuda_runtime", "cuda_driver")


def kernel_family(name):
    """A GPU operation's name without its arguments, template arguments and anonymous namespaces."""
    name = name.replace("(anonymous namespace)::", "").replace("void ", "")
    return re.split(r"[(<]", name)[0].strip()[:90]


def report(title, events):
    """Lines: the title, each operation ('+start idle before, duration, name'), the span, then the operations
    summed by family, longest first. events: Chrome-trace events with ts, dur (µs) and name, any order."""
    gpu = sorted(events, key=lambda ev: ev["ts"])
    lines = [title]
    if not gpu:
        return lines + ["no GPU operations traced"]
    t0 = end = gpu[0]["ts"]
    busy = 0.0
    families = collections.OrderedDict()
    for ev in gpu:
        idle = max(0.0, ev["ts"] - end)
        lines.append("+%8.0f idle %7.1f dur %8.1f  %s" % (ev["ts"] - t0, idle, ev["dur"], ev["name"][:110]))
        end, busy = max(end, ev["ts"] + ev["dur"]), busy + ev["dur"]
        f = families.setdefault(kernel_family(ev["name"]), [0, 0.0, 0.0])
        f[0] += 1
        f[1] += ev["dur"]
        f[2] += idle
    lines.append("span %.0f us, operations %d, their durations summed %.0f us, idle %.0f us"
                 % (end - t0, len(gpu), busy, sum(f[2] for f in families.values())))
    lines.append("by name (count, us, idle before them us), longest first:")
    for key, (count, dur, idle) in sorted(families.items(), key=lambda kv: -kv[1][1]):
        lines.append("  %4d %9.1f %8.1f  %s" % (count, dur, idle, key))
    return lines


def host_report(events):
    """Lines: each CUDA API call of the host ('+start gap before, duration, name'), then the calls summed by name.
    The gap before a call is the host's own code since the previous call ended."""
    calls = sorted(events, key=lambda ev: ev["ts"])
    if not calls:
        return ["host: no CUDA API calls traced"]
    lines = ["host: CUDA API calls (start, the host's own time before it, duration; us)"]
    t0 = end = calls[0]["ts"]
    names = collections.OrderedDict()
    for ev in calls:
        gap = max(0.0, ev["ts"] - end)
        lines.append("  +%8.0f gap %7.1f dur %8.1f  %s" % (ev["ts"] - t0, gap, ev["dur"], ev["name"][:80]))
        end = max(end, ev["ts"] + ev["dur"])
        f = names.setdefault(ev["name"][:80], [0, 0.0, 0.0])
        f[0] += 1
        f[1] += ev["dur"]
        f[2] += gap
    lines.append("host span %.0f us, API calls %d, in them %.0f us, host code between them %.0f us"
                 % (end - t0, len(calls), sum(f[1] for f in names.values()), sum(f[2] for f in names.values())))
    lines.append("host by name (count, us in the calls, us of host code before them), longest first:")
    for key, (count, dur, gap) in sorted(names.items(), key=lambda kv: -(kv[1][1] + kv[1][2])):
        lines.append("  %4d %9.1f %8.1f  %s" % (count, dur, gap, key))
    return lines


def correlation(ev):
    """The id that ties a GPU operation to the host API call that queued it (None where the trace has none)."""
    return (ev.get("args") or {}).get("correlation")


def idle_causes(gpu, host, least_idle_us=10.0):
    """Lines: for each stretch of at least least_idle_us in which the GPU waited (as report() counts idle time), the
    operation after it, when the host queued it (its API call's end, from the start of the wait) and what the host
    did in the wait: its API calls there, longest first, and its own code between them. A launch that ends late in
    the wait means the host was behind; one that ended before it means the operation waited on something else."""
    ops = sorted(gpu, key=lambda ev: ev["ts"])
    calls = sorted(host, key=lambda ev: ev["ts"])
    queued_by = {correlation(ev): ev for ev in calls if correlation(ev) is not None}
    lines = ["GPU waits of %g us or more, and the host meanwhile (us from the wait's start):" % least_idle_us]
    if not ops:
        return lines + ["  none"]
    t0, end = ops[0]["ts"], ops[0]["ts"] + ops[0]["dur"]
    waits = 0
    for ev in ops[1:]:
        idle = ev["ts"] - end
        if idle >= least_idle_us:
            waits += 1
            launch = queued_by.get(correlation(ev))
            queued = ("queued at %+.1f by %s" % (launch["ts"] + launch["dur"] - end, launch["name"][:40])
                      if launch is not None else "its host call not traced")
            inside = [c for c in calls if c["ts"] < ev["ts"] and c["ts"] + c["dur"] > end]
            busy, code, last = collections.OrderedDict(), 0.0, end
            for c in inside:
                code += max(0.0, c["ts"] - last)
                last = max(last, c["ts"] + c["dur"])
                name = c["name"][:40]
                busy[name] = busy.get(name, 0.0) + min(c["ts"] + c["dur"], ev["ts"]) - max(c["ts"], end)
            code += max(0.0, ev["ts"] - last)
            spent = ", ".join("%s %.1f" % kv for kv in sorted(busy.items(), key=lambda kv: -kv[1])[:3]) or "no API call"
            lines.append("  +%8.0f idle %6.1f before %s: %s; host: %s; own code %.1f"
                         % (ev["ts"] - t0, idle, kernel_family(ev["name"])[:50], queued, spent, code))
        end = max(end, ev["ts"] + ev["dur"])
    if waits == 0:
        lines.append("  none")
    return lines


THROUGH = ("capi", "op")  # what a traced call goes through: the C interface, or the PyTorch op with its backward


def trace_one_call(torch, cs, folder, calls, through="capi", flags=""):
    """The GPU operations and host API calls of the last of `calls` calls at the inputs in `folder`, the problem's
    N, D, V, and (plan, kept share of the pairs) from the stage's stats (None, None when it has none). through:
    "capi", cce_run on buffers allocated once; "op", linear_cross_entropy(E, C, t).backward() on leaves whose .grad
    is cleared before each call (bench/peers.py's step). flags: the stage's command-line flags ("--dense-head 0.5")."""
    n, d, v = lm_shape_dims(folder)
    e, c, t = load_inputs(torch, folder, (n, d, v))
    raw_stream = torch.cuda.current_stream().cuda_stream
    handle = cs._stage(0, raw_stream, cs.FINAL_STAGE, flags)  # the op's own object (one thread here: no lock taken)
    stream, error = ctypes.c_void_p(raw_stream), cs._error_buffer()
    if through == "op":
        e.requires_grad_(True)
        c.requires_grad_(True)
        de = dc = None

        def call():
            e.grad = c.grad = None
            cs.linear_cross_entropy(e, c, t, stage=cs.FINAL_STAGE, flags=flags).backward()
    else:
        loss, lse = torch.empty((), device="cuda"), torch.empty(n, device="cuda")
        de, dc, one = torch.empty_like(e), torch.empty_like(c), torch.ones((), device="cuda")
        problem = cs._Problem(n, d, v, 1, 0, 0.0, -100)
        p = lambda x: ctypes.c_void_p(x.data_ptr())

        def call():
            cs._raise(cs._lib.cce_run(handle, ctypes.byref(problem), p(e), p(c), p(t), p(one), p(loss), p(lse), p(de),
                                      p(dc), stream, error, cs._ERROR_BYTES), error)

    for _ in range(calls - 1):
        call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    gpu = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in GPU_CATEGORIES]
    host = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") in HOST_CATEGORIES]
    st = cs._Stats()
    if cs._lib.cce_last_stats(handle, stream, ctypes.byref(st), error, cs._ERROR_BYTES) != 0:
        raise RuntimeError("cce_last_stats: " + error.value.decode())
    plan = {0: "sparse", 1: "dense"}.get(st.plan) if st.has_stats else None
    kept = st.kept_units / st.units if st.has_stats and st.units > 0 else None
    del e, c, t, de, dc
    cs.release_scratch()
    torch.cuda.empty_cache()
    return (n, d, v), gpu, host, plan, kept


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("python_dir", help="the build's python/ folder (cce_stages)")
    ap.add_argument("inputs", nargs="+", help="folders with e.npy, c.npy, targets.npy")
    ap.add_argument("--calls", type=int, default=5, help="calls per folder, the last one traced (default %(default)s)")
    ap.add_argument("--host", action="store_true", help="also list the host's CUDA API calls of the traced call")
    ap.add_argument("--through", choices=THROUGH, default="capi",
                    help="trace the C interface (capi, the default) or the PyTorch op with its backward (op)")
    ap.add_argument("--flags", default="", help="the stage's flags, e.g. \"--dense-head 0.5\" (default: none)")
    ap.add_argument("--out", help="also write the report here")
    a = ap.parse_args(argv)
    check_probe_args(ap, a.calls, a.inputs)
    return a


def main(argv=None):
    a = parse(argv)
    torch, cs = torch_and_stages("stage_timeline.py", a.python_dir)
    if torch is None:
        return EXIT_SKIPPED
    how = "its PyTorch op, loss and backward" if a.through == "op" else "its C interface"
    out = ["stage %s%s through %s, on %s, torch %s" % (cs.FINAL_STAGE, " " + a.flags if a.flags else "", how,
                                                      torch.cuda.get_device_name(0), torch.__version__)]
    for folder in a.inputs:
        (n, d, v), gpu, host, plan, kept = trace_one_call(torch, cs, folder, a.calls, a.through, a.flags)
        title = "== %s: N=%d D=%d V=%d, plan %s, kept share of the (token block, tile) pairs %s" % (
            os.path.basename(os.path.normpath(folder)), n, d, v, plan, "%.4f" % kept if kept is not None else None)
        out += report(title, gpu)
        if a.host:
            out += host_report(host)
            out += idle_causes(gpu, host)
    text = "\n".join(out)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
