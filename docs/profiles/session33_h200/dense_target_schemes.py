#!/usr/bin/env python3
"""Float64 simulation of how stage 10's bf16 dense chunks (one chunk, loss + grad, mean) round the target's term.

Three schemes on the same bf16 inputs, against the exact gradient (float64 from those inputs), with eager PyTorch's
arithmetic beside them (logits rounded to bf16, G = g·(p − onehot) rounded to bf16, products summed exactly and
rounded once):
  current   (08c7ca3): q_ij = bf16(exp(z_ij − R_i)), R_i = z_it; the target's entry of Q = bf16(S_it/α_i);
            dE_i = bf16(α_i·(Q·C)_i); dC = bf16(Qᵀ·bf16(α ∘ E)).
  before    (ca2100e): the target's entry of Q = 0; dC = bf16(bf16(Qᵀ·bf16(α ∘ E)) + T), T_t = Σ_{t_i = t} S_it·E_i
            in fp32; dE_i = bf16(α_i·(Q·C)_i + S_it·C_t).
  proposed: as before, but dC's rows of the batch's target tokens are summed whole before their one rounding:
            bf16((Qᵀ·bf16(α ∘ E))_t + T_t), the other rows bf16(Qᵀ·bf16(α ∘ E)). (Keeping q_it in Q and adding
            only the one-hot part −g_i apart would lose p_it − 1 where p_it is near 1: the fourth case.)
Sums are exact (float64) here; the GPU's are fp32, whose error is far below bf16's. Exits 1 when a claim it
prints does not hold. Run with a Python that has numpy (/usr/bin/python3 here): about 10 s.
"""
import sys

import numpy as np


def bf16(x):
    """Round to the nearest bfloat16 (ties to even), through float32."""
    f = np.asarray(x, dtype=np.float32)
    b = f.view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000
    return b.astype(np.uint32).view(np.float32).astype(np.float64)


def rel(x, ref):
    return float(np.linalg.norm(x - ref) / np.linalg.norm(ref))


def case(name, e, c, t):
    n = e.shape[0]
    g = np.full(n, 1.0 / n)
    z = e @ c.T                                   # exact logits of the bf16 inputs
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    p = np.exp(z - lse[:, None])
    onehot = np.zeros_like(p)
    onehot[np.arange(n), t] = 1.0
    s = g[:, None] * (p - onehot)
    print(f"{name:28s} mean p_it {p[np.arange(n), t].mean():.3f}")
    de_ref, dc_ref = s @ c, s.T @ e
    # eager: logits in bf16, G in bf16
    zb = bf16(z)
    lb = np.log(np.exp(zb - zb.max(1, keepdims=True)).sum(1)) + zb.max(1)
    gb = bf16(g[:, None] * (np.exp(zb - lb[:, None]) - onehot))
    eager = (bf16(gb @ c), bf16(gb.T @ e))
    # the chunks: q against R_i = z_it, alpha from the LSE
    r = z[np.arange(n), t]
    q = bf16(np.exp(z - r[:, None]))
    alpha = g * np.exp(r - lse)
    ae = bf16(alpha[:, None] * e)
    s_t = s[np.arange(n), t]
    qc = q.copy()
    qc[np.arange(n), t] = bf16(s_t / alpha)
    current = (bf16(alpha[:, None] * (qc @ c)), bf16(qc.T @ ae))
    q0 = q.copy()
    q0[np.arange(n), t] = 0.0
    target_terms = np.zeros_like(dc_ref)
    np.add.at(target_terms, t, s_t[:, None] * e)
    before = (bf16(alpha[:, None] * (q0 @ c) + s_t[:, None] * c[t]), bf16(bf16(q0.T @ ae) + target_terms))
    dc_p = bf16(q0.T @ ae)
    rows = np.unique(t)
    dc_p[rows] = bf16((q0.T @ ae)[rows] + target_terms[rows])
    proposed = (before[0], dc_p)
    out = {}
    for label, (de, dc) in (("eager", eager), ("current", current), ("before", before), ("proposed", proposed)):
        out[label] = (rel(de, de_ref), rel(dc, dc_ref))
        print(f"{name:28s} {label:9s} dE {out[label][0]:.3e}  dC {out[label][1]:.3e}")
    return out


def main():
    rng = np.random.default_rng(33)
    n, d, v = 512, 64, 4096
    results = {}
    # flat: an untrained model's logits, a few tenths apart; random targets
    e = bf16(rng.normal(0, 0.3, (n, d)))
    c = bf16(rng.normal(0, 0.3, (v, d)))
    results["flat"] = case("flat, random targets", e, c, rng.integers(0, v, n))
    # a frequent token: half of every row's softmax, the target of half the rows (session 32's test)
    u = rng.normal(0, 1, d)
    u /= np.linalg.norm(u)
    c2 = c.copy()
    c2[7] = bf16(3.0 * u)
    e2 = bf16(e + 2.9 * u[None, :])               # z_i7 near 8.7: about half of each row's softmax
    t2 = rng.integers(0, v, n)
    t2[: n // 2] = 7
    results["frequent"] = case("frequent token, half the targets", e2, c2, t2)
    # calibrated: targets drawn from each row's own softmax (a trained model's gradient is small)
    z = e2 @ c2.T
    pz = np.exp(z - z.max(1, keepdims=True))
    pz /= pz.sum(1, keepdims=True)
    t3 = np.array([rng.choice(v, p=row) for row in pz])
    results["calibrated"] = case("targets from the softmax", e2, c2, t3)
    # confident: each row's target holds nearly all of its softmax (p_it near 1)
    t4 = rng.integers(0, 64, n)
    e4 = bf16(e + 4.0 * c[t4] / np.linalg.norm(c[t4], axis=1, keepdims=True) ** 2 * 3.0)
    results["confident"] = case("confident rows, p_it near 1", e4, c, t4)
    failed = []
    for name, r in results.items():
        for k in (0, 1):
            if r["proposed"][k] > 1.1 * r["eager"][k]:
                failed.append(f"{name}: proposed {'dE dC'.split()[k]} {r['proposed'][k]:.3e} above 1.1x eager's {r['eager'][k]:.3e}")
    flat = results["flat"]
    if not flat["current"][1] > 1.5 * flat["eager"][1]:
        failed.append(f"flat: current dC {flat['current'][1]:.3e} not above 1.5x eager's (the H200's gemma2_flat run had 3.5x)")
    print("claim: at flat, the current scheme's dC is above 1.5x eager's, as measured at gemma2_flat:",
          "holds" if flat["current"][1] > 1.5 * flat["eager"][1] else "DOES NOT HOLD")
    for line in failed:
        print("DOES NOT HOLD:", line)
    print("claim: the proposed scheme is within 1.1x eager's dE and dC error in every case:",
          "holds" if not failed else "DOES NOT HOLD")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
