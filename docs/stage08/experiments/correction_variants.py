#!/usr/bin/env python3
# Stage 08 experiment (docs/stage08/experiments/README.md): tail-correction variants in float64.
# Experiment: tail-correction variants for stage 08, float64 model of the algorithm (no bf16 products).
import sys, time, json, math
import numpy as np
import torch

d = sys.argv[1]
out = sys.argv[2] if len(sys.argv) > 2 else None
dev = "cuda"
E = torch.from_numpy(np.load(f"{d}/e.npy")).to(dev).double()
C = torch.from_numpy(np.load(f"{d}/c.npy")).to(dev).double()
t = torch.from_numpy(np.load(f"{d}/targets.npy")).to(dev).long()
N, D = E.shape
V = C.shape[0]
TR = TC = 128
valid = t >= 0
nv = int(valid.sum())
g = valid.double() / nv
ebar = E[valid].mean(0)
a = C @ ebar
order = torch.argsort(-a, stable=True)
Cs = C[order]
a_s = a[order]
inv = torch.empty_like(order)
inv[order] = torch.arange(V, device=dev)
pos = torch.where(valid, inv[t.clamp(min=0)], torch.full_like(t, -1))
tiles = (V + TC - 1) // TC
blocks = (N + TR - 1) // TR
tile_of = torch.arange(V, device=dev) // TC
tile_size = torch.bincount(tile_of, minlength=tiles).double()

Z = E @ Cs.T
lse = torch.logsumexp(Z, 1)
P = torch.exp(Z - lse[:, None])
del Z
Oh = torch.zeros(N, V, device=dev, dtype=torch.float64)
rows = torch.arange(N, device=dev)
Oh[rows[valid], pos[valid]] = 1.0
dZ = g[:, None] * (P - Oh)
dE_ref = dZ @ Cs
dC_ref = dZ.T @ E
nE, nC = dE_ref.norm().item(), dC_ref.norm().item()
# tile means, weighted means
Cbar = torch.zeros(tiles, D, device=dev, dtype=torch.float64).index_add_(0, tile_of, Cs) / tile_size[:, None]
delta = Cs - Cbar[tile_of]


def tile_softmax(x):  # softmax within each tile of a vector over sorted V
    m = torch.full((tiles,), -1e300, device=dev, dtype=torch.float64).scatter_reduce(0, tile_of, x, "amax")
    w = torch.exp(x - m[tile_of])
    s = torch.zeros(tiles, device=dev, dtype=torch.float64).index_add_(0, tile_of, w)
    return w / s[tile_of]


# pmax per (block, tile)
Pm = P.reshape(N, tiles, TC).amax(2) if V % TC == 0 else None
if Pm is None:
    pad = tiles * TC - V
    Pm = torch.nn.functional.pad(P, (0, pad)).reshape(N, tiles, TC).amax(2)
Pm_rows = torch.where(valid[:, None], Pm, torch.zeros_like(Pm))
padN = blocks * TR - N
Pb = torch.nn.functional.pad(Pm_rows, (0, 0, 0, padN)).reshape(blocks, TR, tiles).amax(1)  # [blocks, tiles]
Pt = torch.zeros(N, device=dev, dtype=torch.float64)
Pt[valid] = P[rows[valid], pos[valid]]
# per-row tile mass excluding the target
Ptile = torch.nn.functional.pad(P, (0, tiles * TC - V)).reshape(N, tiles, TC).sum(2)
Ptile[rows[valid], pos[valid] // TC] -= Pt[valid]

results = []
for e in [8, 9, 10]:
    eps = 2.0 ** -e
    kept_b = Pb >= eps
    kept_rows = kept_b.repeat_interleave(TR, 0)[:N]  # [N, tiles]
    frac = kept_b.double().mean().item()
    Ke = kept_rows[:, tile_of]  # [N, V]
    Md = torch.where(kept_rows, torch.zeros_like(Ptile), Ptile) * valid[:, None]
    gMd = g[:, None] * Md  # [N, tiles]
    # exact part: kept entries, and the targets everywhere
    dZx = torch.where(Ke, dZ, torch.zeros_like(dZ))
    tgt_dropped = valid & ~Ke[rows, pos.clamp(min=0)]
    dZx[rows[tgt_dropped], pos[tgt_dropped]] = dZ[rows[tgt_dropped], pos[tgt_dropped]]
    dE_x = dZx @ Cs
    dC_x = dZx.T @ E
    del dZx
    mass_row = Md.sum(1)
    r = {"eps_exp": e, "kept": frac, "mean_dropped_mass": (mass_row.sum() / nv).item(),
         "max_dropped_mass": mass_row.max().item()}

    def errE(x):
        return ((dE_x + x - dE_ref).norm() / nE).item()

    def errC(x):
        return ((dC_x + x - dC_ref).norm() / nC).item()

    r["dE_none"] = errE(0)
    r["dC_none"] = errC(0)
    base_E = gMd @ Cbar
    r["dE_base"] = errE(base_E)
    G = gMd.T @ E  # [tiles, D]
    base_C = G[tile_of] / tile_size[tile_of][:, None]
    r["dC_base"] = errC(base_C)
    # V1: weighted by exp(beta a_j)
    for beta in [0.5, 1.0, 2.0]:
        w0 = tile_softmax(beta * a_s)
        Cw = torch.zeros(tiles, D, device=dev, dtype=torch.float64).index_add_(0, tile_of, w0[:, None] * Cs)
        r[f"dE_w{beta}"] = errE(gMd @ Cw)
        r[f"dC_w{beta}"] = errC(w0[:, None] * G[tile_of])
    # V2: pooled within-tile covariance (uniform), first order: + M_i^drop Cov E_i
    W_T = gMd.sum(0)  # [tiles]
    Cov_u = delta.T @ delta / V
    r["dE_cov_pooled"] = errE(base_E + gMd.sum(1)[:, None] * (E @ Cov_u))
    wt = (W_T / W_T.sum() / tile_size)[tile_of]
    Cov_m = (delta * wt[:, None]).T @ delta
    r["dE_cov_massw"] = errE(base_E + gMd.sum(1)[:, None] * (E @ Cov_m))
    # V3: exact per-tile first order (upper bound of the pooled forms), dE and dC
    X = E @ delta.T  # [N, V]
    Y = gMd[:, tile_of] / tile_size[tile_of][None, :] * X
    del X
    r["dE_cov_exact"] = errE(base_E + Y @ delta)
    r["dC_cov_exact"] = errC(base_C + Y.T @ E)
    del Y
    # dC pooled first order: (W_T/|T|) Hbar delta_j, Hbar = sum_i gM_i E_i E_i^T / W
    Hbar = (E * gMd.sum(1)[:, None]).T @ E / W_T.sum()
    r["dC_cov_pooled"] = errC(base_C + (W_T / tile_size)[tile_of][:, None] * (delta @ Hbar))
    # combined: tilt around Ebar (weights w0 = exp(a)), first order in (E_i - Ebar), exact per tile
    w0 = tile_softmax(a_s)
    Cw = torch.zeros(tiles, D, device=dev, dtype=torch.float64).index_add_(0, tile_of, w0[:, None] * Cs)
    dl = Cs - Cw[tile_of]
    X = (E - ebar) @ dl.T
    Y = gMd[:, tile_of] * w0[None, :] * X
    del X
    r["dE_wcov_exact"] = errE(gMd @ Cw + Y @ dl)
    r["dC_wcov_exact"] = errC(w0[:, None] * G[tile_of] + Y.T @ E)
    del Y
    Cov_w = (dl * w0[:, None] * (W_T / W_T.sum())[tile_of][:, None]).T @ dl
    r["dE_wcov_pooled"] = errE(gMd @ Cw + gMd.sum(1)[:, None] * ((E - ebar) @ Cov_w))
    print(json.dumps({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
    results.append(r)
if out:
    json.dump(results, open(out, "w"), indent=1)
