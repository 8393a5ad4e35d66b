#!/usr/bin/env python3
# Experiment: kept fraction of stage 08's (token block, tile) decision when rows are grouped by a key.
import sys, json
import numpy as np
import torch
d = sys.argv[1]
dev = "cuda"
E = torch.from_numpy(np.load(f"{d}/e.npy")).to(dev)
C = torch.from_numpy(np.load(f"{d}/c.npy")).to(dev)
t = torch.from_numpy(np.load(f"{d}/targets.npy")).to(dev).long()
N, D = E.shape; V = C.shape[0]; TR = TC = 128
valid = t >= 0
ebar = E[valid].double().mean(0).float()
order = torch.argsort(-(C @ ebar), stable=True)
Cs = C[order]
inv = torch.empty_like(order); inv[order] = torch.arange(V, device=dev)
pos = inv[t.clamp(min=0)]
tiles = (V + TC - 1) // TC
Z = (E.double() @ Cs.double().T)
lse = torch.logsumexp(Z, 1)
P = torch.exp(Z - lse[:, None])
pad = tiles * TC - V
Pp = torch.nn.functional.pad(P, (0, pad)).reshape(N, tiles, TC)
logpmax = torch.log(Pp.amax(2))  # [N, tiles]
mass = Pp.sum(2)
mass[torch.arange(N, device=dev), pos // TC] -= P[torch.arange(N, device=dev), pos]
del Z, Pp
ent = -(P * torch.log(P.clamp(min=1e-300))).sum(1)
del P
logpmax[~valid] = -1e30
def kept_and_mass(perm, e):
    lp = logpmax[perm]
    blocks = (N + TR - 1) // TR
    padN = blocks * TR - N
    lpb = torch.nn.functional.pad(lp, (0, 0, 0, padN), value=-1e30).reshape(blocks, TR, tiles).amax(1)
    kept = lpb >= -e * np.log(2)
    kr = kept.repeat_interleave(TR, 0)[:N]
    m = (mass[perm] * (~kr) * valid[perm][:, None]).sum() / valid.sum()
    return kept.double().mean().item(), m.item()
ident = torch.arange(N, device=dev)
res = {}
for e in [8, 9, 10, 11, 12]:
    thr = -e * np.log(2)
    need = (logpmax >= thr).sum(1)
    keys = {
        "natural": None,
        "count_at_eps": need.double(),
        "count_at_2^-12": (logpmax >= -12 * np.log(2)).sum(1).double(),
        "count_at_2^-10": (logpmax >= -10 * np.log(2)).sum(1).double(),
        "entropy": ent,
        "neg_max_logp": -logpmax.amax(1),
        "count_then_argmax": need.double() * tiles + logpmax.argmax(1).double(),
        "last_needed_tile": (torch.arange(tiles, device=dev)[None, :] * (logpmax >= thr)).amax(1).double(),
    }
    row = {}
    for name, k in keys.items():
        perm = ident if k is None else torch.argsort(k, stable=True)
        row[name] = kept_and_mass(perm, e)
    res[e] = row
    print(e, json.dumps({k: [round(v[0], 4), round(v[1], 5)] for k, v in row.items()}), flush=True)
