"""Stage 10 through the PyTorch op over a series of consecutive batches of one problem, each call timed: what a
training loop pays per batch, including the batches on which the plan decides again (every
kDecideEveryBatches-th in a row of dense ones, on a sample of rows), which a short series never reaches.

    python3 bench/plan_series.py BUILD/python INPUTS_DIR [--calls 48] [--out OUT.json]

INPUTS_DIR holds e.npy, c.npy, targets.npy (stage 01's --save, as bench/peers.py writes them). Each call:
synchronize, CUDA events around linear_cross_entropy(E, C, t).backward(), the plan read back after it."""
import argparse, json, statistics, sys
import numpy as np
import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("python_dir")
    ap.add_argument("inputs")
    ap.add_argument("--calls", type=int, default=48)
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.calls < 1:
        ap.error("--calls must be >= 1")
    sys.path.insert(0, a.python_dir)
    import cce_stages as cs
    e = torch.from_numpy(np.load(a.inputs + "/e.npy")).cuda().bfloat16()
    c = torch.from_numpy(np.load(a.inputs + "/c.npy")).cuda().bfloat16()
    t = torch.from_numpy(np.load(a.inputs + "/targets.npy")).cuda().long()
    E, C = e.detach().requires_grad_(True), c.detach().requires_grad_(True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls = []
    for i in range(a.calls):
        E.grad = None; C.grad = None
        torch.cuda.synchronize()
        start.record()
        cs.linear_cross_entropy(E, C, t).backward()
        end.record()
        end.synchronize()
        st = cs.last_stats()
        calls.append({"call": i, "ms": start.elapsed_time(end), "plan": st.plan if st else None,
                      "decided_kept_fraction": st.decided_kept_fraction if st else None})
        print(f"call {i:3d} {calls[-1]['ms']:8.2f} ms  plan {calls[-1]['plan']}  decided kept "
              f"{calls[-1]['decided_kept_fraction']}", flush=True)
    later = [x["ms"] for x in calls[2:]]
    summary = {"gpu": torch.cuda.get_device_name(0), "inputs": a.inputs, "calls": calls,
               "median_after_2": statistics.median(later), "mean_after_2": statistics.fmean(later)}
    print(f"after the first 2 calls: median {summary['median_after_2']:.2f} ms, mean {summary['mean_after_2']:.2f} ms")
    if a.out:
        json.dump(summary, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
