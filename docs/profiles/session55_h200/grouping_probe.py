#!/usr/bin/env python3
"""Which order of the rows makes 128-row token blocks keep the fewest (block, tile) pairs (a probe; needs a GPU).

    python3 grouping_probe.py DIR --label lm128k --log2-eps -13 [...] --out probe.json

DIR holds e.npy, c.npy, targets.npy. As half_tiles_probe.py: float32 logits on the GPU, the vocabulary in stage
08's order (descending C_j . sum_i E_i, tiles of 128), m_iT - LSE_i per row and tile, stage 08's rule (a pair is kept
when a row of the block with a gradient has m_iT - LSE_i >= ln eps). The orders of the rows, each with the rows
without a gradient last, all from what stage 10 has when it groups (the forward's statistics, no eps yet; "hot": a
tile holding an entry >= 2^-12, stage 10's kGroupingExponent):
  count        stage 10's: the count of hot tiles, most first (a stable sort: ties in token order)
  count_mask   the same, ties by the hot set of the first 31 tiles read as a binary number (tile 0 highest)
  mask_count   the hot set of the first 31 tiles first, ties by the count
  common_mask  the hot set of the 31 tiles hot in most rows (the most common first), ties by the count
  common62     the same over 62 tiles
  minhash      one min-hash of the hot set (a fixed permutation of the tiles), ties by the count
  count_minhash the count in powers of two (log2 buckets), then the min-hash
  argmax       the tile of the row's largest logit, ties by the count
  random       a random order (the other end)
For each eps and order: the kept pairs. And, as stage 10 chooses (--budget): for each order, R(k), the mean over
the rows with a gradient of the misplaced-mass bound M_iT (1 - M_iT / (|T| p_max)) summed over the row's dropped
pairs at candidate k (eps 2^-(8 + k/2), k = 0..18; M_iT the tile's softmax mass without the target's entry), the
first k within the budget (else the last), and the kept pairs there: the whole effect of an order, its eps included.
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

TILE = 128
HOT_LOG = -12 * math.log(2.0)
IGNORE_INDEX = -100


def order_by(keys, n, dev):
    """The permutation that sorts by keys[0], then keys[1], ... (each (tensor, descending)); stable."""
    idx = torch.arange(n, device=dev)
    for key, desc in reversed(keys):
        idx = idx[torch.sort(key[idx], descending=desc, stable=True).indices]
    return idx


def mask_of(hot, columns):
    bits = torch.zeros(hot.shape[0], dtype=torch.int64, device=hot.device)
    for place, t in enumerate(columns):
        bits |= hot[:, t].to(torch.int64) << (len(columns) - 1 - place)
    return bits


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--label", required=True)
    p.add_argument("--log2-eps", type=float, nargs="+", required=True)
    p.add_argument("--rows", type=int, default=1024)
    p.add_argument("--budget", type=float, default=0.022, help="stage 10's kDefaultMisplacedMass")
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
    mass = torch.empty(n, tiles, device=dev)  # M_iT: the tile's softmax mass, the target's entry left out
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
    hot = (rel >= HOT_LOG) & valid[:, None]
    count = hot.sum(1)
    first31 = list(range(min(31, tiles)))
    common = torch.argsort(hot.sum(0), descending=True, stable=True).tolist()
    g = torch.Generator(device="cpu").manual_seed(55)
    perm = torch.randperm(tiles, generator=g).to(dev)
    minhash = torch.where(hot, perm[None, :], tiles).amin(1)
    perm2 = torch.randperm(tiles, generator=g).to(dev)
    minhash2 = torch.where(hot, perm2[None, :], tiles).amin(1)
    half_bucket = torch.floor(2 * torch.log2(count.float() + 1)).to(torch.int64)
    bucket = torch.floor(torch.log2(count.float() + 1)).to(torch.int64)
    keys = {
        "count": [(count, True)],
        "count_mask": [(count, True), (mask_of(hot, first31), True)],
        "mask_count": [(mask_of(hot, first31), True), (count, True)],
        "common_mask": [(mask_of(hot, common[:31]), True), (count, True)],
        "common62": [(mask_of(hot, common[:62]), True), (count, True)],
        "minhash": [(minhash, False), (count, True)],
        "count_minhash": [(bucket, True), (minhash, False)],
        "argmax": [(rel.argmax(1), False), (count, True)],
        "minhash2": [(minhash, False), (minhash2, False), (count, True)],
        "half_bucket_minhash": [(half_bucket, True), (minhash, False)],
        "count_argmax": [(bucket, True), (rel.argmax(1), False)],
        "random": [(torch.rand(n, generator=torch.Generator(device="cpu").manual_seed(7)).to(dev), False)],
    }
    orders = {name: order_by([(valid.to(torch.int64), True)] + k, n, dev) for name, k in keys.items()}
    result = {"label": a.label, "n": n, "d": d, "v": v, "tiles": tiles, "eps": []}
    pad = (-n) % TILE
    blocks = (n + pad) // TILE
    for log2_eps in a.log2_eps:
        needs = (rel >= log2_eps * math.log(2.0)) & valid[:, None]
        row = {"log2_eps": log2_eps, "pairs": blocks * tiles, "kept": {}}
        for name, order in orders.items():
            x = torch.cat([needs[order], torch.zeros(pad, tiles, dtype=torch.bool, device=dev)])
            row["kept"][name] = int(x.view(blocks, TILE, tiles).any(dim=1).sum())
        base = row["kept"]["count"]
        print(f"{a.label} eps 2^{log2_eps:g}: " + ", ".join(
            f"{k} {100 * x / (blocks * tiles):.2f}% ({x / base:.3f}x)" for k, x in row["kept"].items()), flush=True)
        result["eps"].append(row)
    width = torch.full((tiles,), float(TILE), device=dev)
    width[-1] = v - TILE * (tiles - 1)
    p_max = torch.exp(rel)
    bound = torch.nan_to_num(mass * torch.clamp(1.0 - mass / (width[None, :] * p_max), min=0.0), nan=0.0)
    bound = torch.where(valid[:, None], bound, 0.0)
    rel_g = torch.where(valid[:, None], rel, -math.inf)
    rows_g = int(valid.sum())
    log_eps = [math.log(math.ldexp(1.0 if k % 2 == 0 else 0.70710677, -(8 + k // 2))) for k in range(19)]
    result["budget"] = a.budget
    result["chosen"] = {}
    for name, order in orders.items():
        ro = torch.cat([rel_g[order], torch.full((pad, tiles), -math.inf, device=dev)]).view(blocks, TILE, tiles)
        bo = torch.cat([bound[order], torch.zeros(pad, tiles, device=dev)]).view(blocks, TILE, tiles)
        pair_max, pair_mis = ro.amax(dim=1), bo.double().sum(dim=1)
        r_k, kept_k = [], []
        for le in log_eps:
            dropped = pair_max < le
            r_k.append(float(pair_mis[dropped].sum()) / rows_g)
            kept_k.append(int((~dropped).sum()))
        k = next((k for k in range(19) if r_k[k] <= a.budget), 18)
        result["chosen"][name] = {"k": k, "log2_eps": -(8 + k / 2), "R": r_k[k], "kept_pairs": kept_k[k],
                                  "kept_fraction": kept_k[k] / (blocks * tiles), "R_k": r_k, "kept_k": kept_k}
    base = result["chosen"]["count"]["kept_pairs"]
    print(f"{a.label} as stage 10 chooses (budget {a.budget}): " + ", ".join(
        f"{k} 2^{c['log2_eps']:g} R {c['R']:.4f} kept {100 * c['kept_fraction']:.2f}% ({c['kept_pairs'] / base:.3f}x)"
        for k, c in result["chosen"].items()), flush=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
