#!/usr/bin/env python3
"""Session 60: what keeping the vocabulary order costs in lm32k's training (calls 4 and 6).

Per run: the steps the dense plan ran, the loss part's mean ms over all steps, and over the sparse steps from step 200
on (after the early phase where the plan choice flips near its threshold) the mean ms and mean kept share of pairs.
Prints one line per run and, per seed, the kept order against sorted every step; exits 1 where the claim the
WORKLOG makes of them (the last line) does not hold."""
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
            print(f"{kind:24s} seed {run['seed']}: dense plan {r['dense']:3d} of 500 steps, "
                  f"loss part {r['mean_ms']:.3f} ms; sparse steps 200-499 ({r['late_n']}): {r['late_ms']:.3f} ms, "
                  f"kept share {r['late_kept']:.4f}")
    for seed, runs in sorted(by_seed.items()):
        kept, every = runs["final"], runs["final_sort_every_batch"]
        print(f"seed {seed}: order kept / sorted every step, sparse steps 200-499: "
              f"time {kept['late_ms'] / every['late_ms']:.3f}x, kept share {kept['late_kept'] / every['late_kept']:.3f}x; "
              f"all steps {kept['mean_ms'] / every['mean_ms']:.3f}x")
    # The claim stage 10's WORKLOG and README make of these runs, checked: exit 1 where it does not hold.
    ratios = {seed: (runs["final"]["late_ms"] / runs["final_sort_every_batch"]["late_ms"],
                     runs["final"]["late_kept"] / runs["final_sort_every_batch"]["late_kept"])
              for seed, runs in by_seed.items()}
    holds = len(ratios) == 3 and all(time < 0.985 and 1.0 < kept < 1.015 for time, kept in ratios.values())
    print(("holds" if holds else "DOES NOT HOLD") + ": at each of the three seeds the kept order's sparse steps 200-499 "
          "take under 0.985x the time of sorting every step, keeping 1.000x to 1.015x the pairs")
    return 0 if holds else 1


if __name__ == "__main__":
    raise SystemExit(main())
