#!/usr/bin/env python3
"""Stage 10 through the PyTorch op over a series of consecutive batches of one problem, each call timed: what a
training loop pays per batch, including the batches on which the plan decides again (every
kDecideEveryBatches-th in a row of dense ones, on a sample of rows), which a short series never reaches, and the
slow stretches once the GPU runs at its power cap (bench/README.md, "Power and the length of a series").

    python3 bench/plan_series.py BUILD/python INPUTS_DIR [--calls 48] [--out OUT.json]

INPUTS_DIR holds e.npy, c.npy, targets.npy (stage 01's --save, as bench/peers.py writes them). Each call:
synchronize, CUDA events around linear_cross_entropy(E, C, t).backward(), the plan read back after it. The summary
leaves out the first two calls (the first decides the plan, the second allocates the dense plan's scratch).
Exit status 2 for bad arguments, 77 (skipped) without PyTorch or a CUDA device."""
import argparse
import json
import statistics
import sys

from peers import EXIT_SKIPPED, check_probe_args, lm_shape_dims, load_inputs, torch_and_stages  # as peers.py reads them

SETTLING_CALLS = 2  # left out of the summary


def summarize(ms):
    """Median and mean of the calls after the settling ones; None when there are none."""
    later = ms[SETTLING_CALLS:]
    if not later:
        return None
    return {"median_after_settling": statistics.median(later), "mean_after_settling": statistics.fmean(later),
            "min_after_settling": min(later), "max_after_settling": max(later)}


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("python_dir", help="the build's python/ folder (cce_stages)")
    ap.add_argument("inputs", help="a folder with e.npy, c.npy, targets.npy")
    ap.add_argument("--calls", type=int, default=48, help="calls in a row (default %(default)s)")
    ap.add_argument("--out", help="write the calls and the summary as JSON here")
    a = ap.parse_args(argv)
    check_probe_args(ap, a.calls, [a.inputs])
    return a


def main(argv=None):
    a = parse(argv)
    torch, cs = torch_and_stages("plan_series.py", a.python_dir)
    if torch is None:
        return EXIT_SKIPPED
    e, c, t = load_inputs(torch, a.inputs, lm_shape_dims(a.inputs))
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = []
    for i in range(a.calls):
        E.grad = None
        C.grad = None
        torch.cuda.synchronize()
        start.record()
        cs.linear_cross_entropy(E, C, t).backward()
        end.record()
        end.synchronize()
        st = cs.last_stats()
        calls.append({"call": i, "ms": start.elapsed_time(end), "plan": st.plan if st else None,
                      "decided_kept_fraction": st.decided_kept_fraction if st else None})
        print("call %3d %8.2f ms  plan %s  decided kept %s" % (i, calls[-1]["ms"], calls[-1]["plan"],
                                                               calls[-1]["decided_kept_fraction"]), flush=True)
    summary = summarize([x["ms"] for x in calls])
    if summary:
        print("after the first %d calls: median %.2f ms, mean %.2f ms, min %.2f, max %.2f"
              % (SETTLING_CALLS, summary["median_after_settling"], summary["mean_after_settling"],
                 summary["min_after_settling"], summary["max_after_settling"]))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(0), "inputs": a.inputs, "calls": calls,
                       "summary": summary}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
