#!/usr/bin/env python3
"""fit_budget.py (session 52): which of the automatic eps's candidate measures has one threshold that keeps stage
10's errors at or below eager's at every shape of call 2 (emulate_drop.py's JSON) and still takes the eps the
issue's times need. No GPU; Python's standard library.

    python3 docs/profiles/session52_h200/fit_budget.py

A shape's allowed eps: those from which on (smaller eps) the emulated bf16 dE and dC are both at or below eager's.
A measure m(eps) (D: dropped mass, R: misplaced mass, L2: the residual's squared L2 norm, B: its bound, each per
row, alone or divided by a scale of the shape's logits) separates when max over shapes of m at the eps the time needs
(lm128k 2^-12, lm32k 2^-9, the generated shapes 2^-8; the other snapshots none: the last candidate serves them) lies
below min over shapes of m at every eps not allowed, candidates 2^-8 .. 2^-17. Prints each measure's margin (that
min over that max) and asserts what the WORKLOG says: R alone separates, D alone does not.
"""
import itertools
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CALL2 = os.path.join(HERE, "logs", "call2")
MEASURES = {"D": "dropped_mass_per_row", "R": "residual_bound_per_row", "L2": "residual_l2sq_per_row",
            "B": "residual_l2sq_bound_per_row"}
SCALES = {"1": lambda s: 1.0, "lse": lambda s: s["lse"], "target logit": lambda s: s["target_logit"],
          "rms logit": lambda s: s["rms_logit_under_p"], "sqrt(p2z2 stat)": lambda s: s["p2z2_from_statistics_per_row"] ** 0.5,
          "p2z2 stat": lambda s: s["p2z2_from_statistics_per_row"], "target p": lambda s: s["target_p"]}
NEEDED = {"gemma2": 8, "llama3": 8, "gpt2": 8, "lm32k": 9, "lm128k": 12}
LAST = 17


def margins(shapes):
    out = {}
    for (mk, field), (sk, scale) in itertools.product(MEASURES.items(), SCALES.items()):
        lo, hi = 0.0, math.inf
        for name, s in shapes.items():
            eps = [r for r in sorted(s["eps"], key=lambda r: r["eps_exponent"]) if r["eps_exponent"] <= LAST]
            ok = [r["bf16_dE"] <= s["eager"]["dE"] and r["bf16_dC"] <= s["eager"]["dC"] for r in eps]
            first_ok = next(i for i in range(len(eps)) if all(ok[i:]))
            m = {r["eps_exponent"]: r[field] / scale(s["scale"]) for r in eps}
            if name in NEEDED:
                lo = max(lo, m[NEEDED[name]])
            hi = min([hi] + [m[r["eps_exponent"]] for r in eps[:first_ok]])
        out[(mk, sk)] = (hi / lo, lo, hi)
    return out


def main():
    shapes = {}
    for f in ("emulated_generated.json", "emulated_lm.json"):
        with open(os.path.join(CALL2, f)) as fh:
            shapes.update(json.load(fh)["shapes"])
    found = margins(shapes)
    for (mk, sk), (margin, lo, hi) in sorted(found.items(), key=lambda kv: -kv[1][0]):
        print(f"{mk:>2} / {sk:<16} margin {margin:6.3f}  (within at the needed eps up to {lo:.4g}, "
              f"over eager's from {hi:.4g})")
    assert found[("R", "1")][0] > 1.0, "R alone does not separate"
    assert found[("D", "1")][0] <= 1.0 + 1e-3, "D alone separates"
    lo, hi = found[("R", "1")][1:]
    print(f"R alone separates: a budget in [{lo:.4f}, {hi:.4f}); D alone does not")


if __name__ == "__main__":
    main()
