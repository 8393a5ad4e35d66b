#!/usr/bin/env python3
"""What stage 10's eps choice sees, per row and tile, dumped for emulation on the CPU (a probe; needs a GPU).

    python3 dump_pairs_probe.py DIR --label lm128k --out OUTDIR

DIR holds e.npy, c.npy, targets.npy. As session 55's grouping_probe.py: float32 logits on the GPU, the vocabulary in
stage 08's order (descending C_j . sum_i E_i, tiles of 128), per row i and tile T: rel = m_iT - LSE_i and the
misplaced-mass bound M_iT (1 - M_iT / (|T| p_max)) (M_iT the tile's softmax mass without the target's entry). Writes
OUTDIR/<label>_pairs.npz (compressed):
  level  uint8 [N, tiles]: how many of the eps_k = 2^-(8 + k/8), k = 0..72 (an eighth of an exponent apart: stage
         10's quarter candidates are the even k, its half ones k % 4 == 0) drop the row's tile (rel < ln eps_k holds
         for k < level); rows without a gradient 73
  valid  bool [N]: the rows with a gradient
OUTDIR/<label>_bound.npz (compressed; apart, each file under the device's 16 MiB):
  bound  uint16 [N, tiles]: the bound as bfloat16 bits (float32 rounded to nearest even; 0 for rows without a gradient)
and OUTDIR/<label>_pairs.json: the shape and, as a check for the emulation (emulate_orders.py), R and the kept pairs
per eps_k for stage 10's count order computed here in float32/float64.
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

TILE = 128
CANDIDATES = 73  # 2^-8 ... 2^-17, an eighth of an exponent apart (stage 10's 37 candidates: every second one)
HOT_LOG = -12 * math.log(2.0)
IGNORE_INDEX = -100


def log_eps():
    return [math.log(2.0 ** -(8 + k / 8)) for k in range(CANDIDATES)]


def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (x finite, >= 0)."""
    u = x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.to(torch.int32).to(torch.int16)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--label", required=True)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    e = torch.from_numpy(np.load(Path(a.data) / "e.npy")).to(dev, torch.float32)
    c = torch.from_numpy(np.load(Path(a.data) / "c.npy")).to(dev, torch.float32)
    t = torch.from_numpy(np.load(Path(a.data) / "targets.npy")).to(dev, torch.int64)
    n, d = e.shape
    v = c.shape[0]
    tiles = math.ceil(v / TILE)
    order_v = torch.sort((c.double() @ e.double().sum(0)).float(), descending=True, stable=True).indices
    cs = torch.zeros(tiles * TILE, d, device=dev)
    cs[:v] = c[order_v]
    place_v = torch.empty_like(order_v)
    place_v[order_v] = torch.arange(v, device=dev)
    valid = t != IGNORE_INDEX
    rel = torch.empty(n, tiles, device=dev)
    mass = torch.empty(n, tiles, device=dev)
    for first in range(0, n, a.rows):
        z = e[first:first + a.rows] @ cs.T
        z[:, v:] = -math.inf
        rows = len(z)
        lse = torch.logsumexp(z.double(), dim=1).float()
        rel[first:first + rows] = z.view(rows, tiles, TILE).amax(dim=2) - lse[:, None]
        pz = torch.exp(z - lse[:, None])
        m = pz.view(rows, tiles, TILE).sum(dim=2)
        tt = t[first:first + rows]
        ok = tt != IGNORE_INDEX
        pos = place_v[tt.clamp(min=0)]
        p_t = pz.gather(1, pos[:, None])[:, 0]
        m[torch.arange(rows, device=dev)[ok], (pos // TILE)[ok]] -= p_t[ok]
        mass[first:first + rows] = m.clamp(min=0.0)
    del cs
    width = torch.full((tiles,), float(TILE), device=dev)
    width[-1] = v - TILE * (tiles - 1)
    bound = torch.nan_to_num(mass * torch.clamp(1.0 - mass / (width[None, :] * torch.exp(rel)), min=0.0), nan=0.0)
    bound = torch.where(valid[:, None], bound, 0.0)
    thresholds = torch.tensor(log_eps(), device=dev)
    level = (rel[:, :, None] < thresholds[None, None, :]).sum(dim=2).to(torch.uint8)
    level = torch.where(valid[:, None], level, torch.full_like(level, CANDIDATES))
    # The check: stage 10's count order (hot tiles: an entry >= 2^-12, most first, rows without a gradient last).
    count = ((rel >= HOT_LOG) & valid[:, None]).sum(1)
    idx = torch.arange(n, device=dev)
    idx = idx[torch.sort(count[idx], descending=True, stable=True).indices]
    idx = idx[torch.sort(valid[idx].to(torch.int64), descending=True, stable=True).indices]
    pad = (-n) % TILE
    blocks = (n + pad) // TILE
    lo = torch.cat([level[idx], torch.full((pad, tiles), CANDIDATES, dtype=torch.uint8, device=dev)])
    bo = torch.cat([bound[idx], torch.zeros(pad, tiles, device=dev)])
    pair_level = lo.view(blocks, TILE, tiles).amin(dim=1)
    pair_mis = bo.view(blocks, TILE, tiles).double().sum(dim=1)
    rows_g = int(valid.sum())
    r_k = [float(pair_mis[pair_level > k].sum()) / rows_g for k in range(CANDIDATES)]
    kept_k = [int((pair_level <= k).sum()) for k in range(CANDIDATES)]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / f"{a.label}_pairs.npz", level=level.cpu().numpy(), valid=valid.cpu().numpy())
    np.savez_compressed(out / f"{a.label}_bound.npz", bound=bf16_bits(bound).cpu().numpy().view(np.uint16))
    meta = {"label": a.label, "n": n, "d": d, "v": v, "tiles": tiles, "tile": TILE, "candidates": CANDIDATES,
            "rows_with_gradient": rows_g, "count_order": {"R_k": r_k, "kept_k": kept_k, "pairs": blocks * tiles}}
    (out / f"{a.label}_pairs.json").write_text(json.dumps(meta, indent=1) + "\n")
    k = next((k for k in range(0, CANDIDATES, 2) if r_k[k] <= 0.022), CANDIDATES - 1)  # stage 10's quarter grid
    print(f"{a.label}: N {n} tiles {tiles}; the count order at budget 0.022: 2^-{8 + k / 8:g}, R {r_k[k]:.4f}, "
          f"kept {100 * kept_k[k] / (blocks * tiles):.2f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
