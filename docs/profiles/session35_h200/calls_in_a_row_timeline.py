"""Where the GPU time of one loss + gradient call goes, back to back: the final stage's op called CALLS times in a row
(as cce_bench times it), the last PROFILED of them under torch.profiler. From the profiler's trace, per call: the span
from its first GPU activity to its last, the time some kernel, memset or copy of the call was running (busy), and
the idle rest, with the longest idle gaps, what ran before and after each, and the host's waits (stream or event
synchronizations, blocking copies) of the call. The profiler's kernel times are those of calls in a row, at the
clocks the GPU keeps back to back, so busy + idle = span answers what an ncu sum of lone kernels cannot: how much of
the call is not in a kernel.

    python3 docs/profiles/session35_h200/calls_in_a_row_timeline.py --cce-python build/python --out timeline.json

Session 35's call 8 ran it as bench/call_timeline.py; it stays here as the record of that call. The repository's
tool for the same question is bench/stage_timeline.py (--through op --host: one traced call after warm-up calls,
each GPU wait with what the host did meanwhile).

Inputs: plain random data made here (E ~ N(0,1), C ~ N(0,1/D), as the executables' --data random; every logit
~N(0,1), a flat softmax), or --load DIR with e.npy, c.npy, targets.npy (peers.py's files) for one shape. Needs
PyTorch with CUDA; exits 2 with one line otherwise."""
import argparse, json, os, sys, tempfile

SHAPES = {"gemma2_flat": (8192, 2304, 256000), "lm128k_s0": (8192, 2048, 128000), "lm32k": (8192, 768, 32000),
          "gpt2": (20480, 768, 50257)}
GPU_CATEGORIES = ("kernel", "gpu_memset", "gpu_memcpy")
HOST_WAITS = ("cudaStreamSynchronize", "cudaEventSynchronize", "cudaDeviceSynchronize", "cudaMemcpy",
              "cudaStreamWaitEvent", "cuStreamSynchronize", "cuEventSynchronize", "cuMemcpyDtoH_v2")


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cce-python", default="build/python", help="the folder holding the cce_stages package")
    p.add_argument("--shapes", default="gemma2_flat", help="comma-separated, of: " + ", ".join(SHAPES))
    p.add_argument("--load", help="a folder of e.npy, c.npy, targets.npy (one shape) instead of random data")
    p.add_argument("--flags", default="", help="the stage's flags, e.g. '--plan dense'")
    p.add_argument("--calls", type=int, default=12, help="calls in a row, the profiled ones last")
    p.add_argument("--profiled", type=int, default=4, help="how many of the last calls the profiler records")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--out", required=True, help="the JSON to write")
    a = p.parse_args(argv)
    names = [s for s in a.shapes.split(",") if s]
    bad = [s for s in names if s not in SHAPES]
    if bad or not names:
        p.exit(2, "calls_in_a_row_timeline.py: error: --shapes: unknown %s (known: %s)\n" % (",".join(bad) or "''", ", ".join(SHAPES)))
    if a.load and len(names) != 1:
        p.exit(2, "calls_in_a_row_timeline.py: error: --load takes one shape in --shapes\n")
    if a.calls < 1 or not 1 <= a.profiled <= a.calls:
        p.exit(2, "calls_in_a_row_timeline.py: error: want --calls >= 1 and 1 <= --profiled <= --calls\n")
    a.names = names
    return a


def union_length(intervals):
    """The length covered by [start, end) intervals (µs)."""
    total, reach = 0.0, None
    for s, e in sorted(intervals):
        if reach is None or s > reach:
            total += e - s
            reach = e
        elif e > reach:
            total += e - reach
            reach = e
    return total


def idle_gaps(events):
    """The idle stretches between a call's GPU events in time order: (length, start, before, after)."""
    gaps, reach, last = [], None, None
    for ev in sorted(events, key=lambda x: x["ts"]):
        if reach is not None and ev["ts"] > reach:
            gaps.append((ev["ts"] - reach, reach, last, ev["name"]))
        if reach is None or ev["ts"] + ev["dur"] > reach:
            reach, last = ev["ts"] + ev["dur"], ev["name"]
    return sorted(gaps, reverse=True)


def calls_of(trace, marker):
    """Per profiled call (a record_function range named marker + index): its GPU events, found by the correlation ids
    of the runtime and driver calls made inside the range, and its host waits."""
    events = trace["traceEvents"]
    ranges = sorted((ev["ts"], ev["ts"] + ev["dur"], ev["name"]) for ev in events
                    if ev.get("cat") == "user_annotation" and ev.get("name", "").startswith(marker))
    api = [ev for ev in events if ev.get("cat") in ("cuda_runtime", "cuda_driver")]
    gpu = {}
    for ev in events:
        if ev.get("cat") in GPU_CATEGORIES and "correlation" in ev.get("args", {}):
            gpu.setdefault(ev["args"]["correlation"], []).append(ev)
    calls = []
    for start, end, name in ranges:
        inside = [ev for ev in api if start <= ev["ts"] <= end]
        mine = [g for ev in inside for g in gpu.get(ev.get("args", {}).get("correlation"), [])]
        waits = [ev for ev in inside if ev["name"] in HOST_WAITS]
        calls.append((name, mine, waits))
    return calls


def summarize(name, mine, waits):
    if not mine:
        raise RuntimeError("%s: no GPU activity found in the trace (is CUPTI working?)" % name)
    t0 = min(ev["ts"] for ev in mine)
    t1 = max(ev["ts"] + ev["dur"] for ev in mine)
    busy = union_length([(ev["ts"], ev["ts"] + ev["dur"]) for ev in mine])
    by_kind = {}
    for ev in mine:
        k = by_kind.setdefault(ev["name"][:80], [0, 0.0])
        k[0] += 1
        k[1] += ev["dur"]
    gaps = idle_gaps(mine)
    return {"call": name, "span_ms": (t1 - t0) / 1e3, "busy_ms": busy / 1e3, "idle_ms": (t1 - t0 - busy) / 1e3,
            "gpu_events": len(mine),
            "by_name_ms": {k: {"count": v[0], "ms": v[1] / 1e3}
                           for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1][1])},
            "largest_gaps": [{"us": g[0], "at_us": g[1] - t0, "after": g[2][:80], "before": g[3][:80]}
                             for g in gaps[:8]],
            "host_waits": [{"name": w["name"], "us": w["dur"], "at_us": w["ts"] - t0} for w in waits]}


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        import torch
    except ImportError as exc:
        print("calls_in_a_row_timeline.py: error: PyTorch does not import (%s)" % exc, file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("calls_in_a_row_timeline.py: error: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    sys.path.insert(0, a.cce_python)
    try:
        import cce_stages
    except Exception as exc:
        print("calls_in_a_row_timeline.py: error: cce_stages does not import from %s (%s)" % (a.cce_python, exc), file=sys.stderr)
        return 2
    from torch.profiler import ProfilerActivity, profile, record_function
    report = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "flags": a.flags, "calls": a.calls,
              "profiled": a.profiled, "shapes": {}}
    for shape in a.names:
        n, d, v = SHAPES[shape]
        g = torch.Generator(device="cuda").manual_seed(a.seed)
        if a.load:
            import numpy as np
            e = torch.from_numpy(np.load(os.path.join(a.load, "e.npy"))).cuda().to(torch.bfloat16)
            c = torch.from_numpy(np.load(os.path.join(a.load, "c.npy"))).cuda().to(torch.bfloat16)
            t = torch.from_numpy(np.load(os.path.join(a.load, "targets.npy"))).cuda().to(torch.int64)
            n, d, v = e.shape[0], e.shape[1], c.shape[0]
        else:
            e = torch.randn(n, d, device="cuda", generator=g).to(torch.bfloat16)
            c = (torch.randn(v, d, device="cuda", generator=g) / d ** 0.5).to(torch.bfloat16)
            t = torch.randint(0, v, (n,), device="cuda", generator=g)
        e.requires_grad_(True)
        c.requires_grad_(True)

        def one_call():
            e.grad = c.grad = None
            cce_stages.linear_cross_entropy(e, c, t, flags=a.flags).backward()

        for _ in range(a.calls - a.profiled):
            one_call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i in range(a.profiled):
                with record_function("cce_call_%d" % i):
                    one_call()
            torch.cuda.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        calls = [summarize(*x) for x in calls_of(trace, "cce_call_")]
        if len(calls) != a.profiled:
            raise RuntimeError("%s: %d profiled calls found in the trace, %d made" % (shape, len(calls), a.profiled))
        report["shapes"][shape] = {"n": n, "d": d, "v": v, "data": "loaded from " + a.load if a.load else "random",
                                   "calls": calls}
        spans = sorted(x["span_ms"] for x in calls)
        idles = sorted(x["idle_ms"] for x in calls)
        print("%s N=%d D=%d V=%d %s: span %.3f ms (median of %d), idle %.3f ms; per call:" %
              (shape, n, d, v, a.flags or "(default flags)", spans[len(spans) // 2], len(calls), idles[len(idles) // 2]))
        for x in calls:
            print("  %s  span %.3f  busy %.3f  idle %.3f ms, %d GPU events, host waits %s" %
                  (x["call"], x["span_ms"], x["busy_ms"], x["idle_ms"], x["gpu_events"],
                   ", ".join("%s %.0f us" % (w["name"], w["us"]) for w in x["host_waits"]) or "none"))
        last = calls[-1]
        for k, val in list(last["by_name_ms"].items())[:12]:
            print("    %8.3f ms  x%-3d %s" % (val["ms"], val["count"], k))
        for gap in last["largest_gaps"][:6]:
            print("    idle %8.1f us at %9.1f us, after %s, before %s" % (gap["us"], gap["at_us"], gap["after"][:50],
                                                                       gap["before"][:50]))
        del e, c, t
        torch.cuda.empty_cache()
    with open(a.out, "w") as f:
        json.dump(report, f, indent=1)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
