#!/usr/bin/env python3
"""Session 60: what keeping the vocabulary order costs in lm32k's training (calls 4 and 6).

Per run: the steps the dense plan ran, the loss part's mean ms over all steps, and over the sparse steps from step 200
on (after the early phase where the plan choice flips near its threshold) the mean ms and mean kept share of pairs.
Prints one line per run and, per seed, the kept order against sorted every step."""
import json
import pathlib
import statistics as st

LOGS = pathlib.Path(__file__).resolve().parent / "logs"
FILES = [LOGS / "call4/train_compare_lm32k_order.json", LOGS / "call6/train_compare_lm32k_order_seeds23.json"]


def summary(run):
    s = run["series"]
    steps = list(zip(s["loss_ms"], s["kept_frac"], s["dense_plan"]))
    late_sparse = [(ms, kf) for ms, kf, dense in steps[200:] if dense == 0]
    return {"dense": sum(1 for *_, dense in steps if dense == 1), "mean_ms": st.mean(ms for ms, *_ in steps),
            "late_ms": st.mean(ms for ms, _ in late_sparse), "late_kept": st.mean(kf for _, kf in late_sparse),
            "late_n": len(late_sparse)}


def main():
    by_seed = {}
    for f in FILES:
        for run in json.loads(f.read_text())["runs"]:
            kind = run["kind"]
            r = by_seed.setdefault(run["seed"], {})[kind] = summary(run)
            print(f"{kind:24s} seed {run['seed']}: dense plan {r['dense']:3d} of 500 steps, loss part {r['mean_ms']:.3f} "
                  f"ms; sparse steps 200-499 ({r['late_n']}): {r['late_ms']:.3f} ms, kept share {r['late_kept']:.4f}")
    for seed, runs in sorted(by_seed.items()):
        kept, every = runs["final"], runs["final_sort_every_batch"]
        print(f"seed {seed}: order kept / sorted every step, sparse steps 200-499: time {kept['late_ms'] / every['late_ms']:.3f}x, "
              f"kept share {kept['late_kept'] / every['late_kept']:.3f}x; all steps {kept['mean_ms'] / every['mean_ms']:.3f}x")


if __name__ == "__main__":
    main()
