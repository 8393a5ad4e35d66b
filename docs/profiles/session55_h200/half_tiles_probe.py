#!/usr/bin/env python3
"""How much of the kept-tile work a finer token block would skip (a probe for a next kernel step; needs a GPU).

    python3 half_tiles_probe.py DIR --label lm128k --log2-eps -13 [-12.5 ...] --out probe.json

DIR holds e.npy [N, D], c.npy [V, D], targets.npy [N] (a stage's --save, bench/lm_data.py's output). The logits
are computed in float32 from the (bf16-valued) inputs on the GPU. Orders as stages 08 and 10 make them: the
vocabulary sorted by descending key_j = C_j . sum_i E_i, in tiles of 128; the rows grouped by how many tiles hold
an entry >= 2^-12 (most first; a stable sort). A (token block, tile) pair is kept when some row of the block with a
gradient has m_iT - LSE_i >= ln eps (stage 08's rule), m_iT its largest logit in the tile.

For each eps: the kept pairs at 128-row blocks (the stage's kept fraction; compare with its report line), and how
many of their 64-row halves and 32-row quarters hold such a row. A half without one is work that the recomputation
and dC's owners (whose k-loop runs over the tokens) could skip, if the decision and the tail correction were kept
per half.
"""
import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

TILE = 128
GROUPING_LOG = -12 * math.log(2.0)
IGNORE_INDEX = -100


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data")
    p.add_argument("--label", required=True)
    p.add_argument("--log2-eps", type=float, nargs="+", required=True)
    p.add_argument("--rows", type=int, default=1024, help="rows whose logits exist at once")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    dev = torch.device("cuda")
    e = torch.from_numpy(np.load(Path(a.data) / "e.npy")).to(dev, torch.float32)
    c = torch.from_numpy(np.load(Path(a.data) / "c.npy")).to(dev, torch.float32)
    t = torch.from_numpy(np.load(Path(a.data) / "targets.npy")).to(dev, torch.int64)
    n, d = e.shape
    v = c.shape[0]
    tiles = math.ceil(v / TILE)
    torch.backends.cuda.matmul.allow_tf32 = False
    key = (c.double() @ e.double().sum(0)).float()
    order = torch.sort(key, descending=True, stable=True).indices
    cs = torch.zeros(tiles * TILE, d, device=dev)
    cs[:v] = c[order]
    rel = torch.empty(n, tiles, device=dev)  # m_iT - LSE_i in the sorted vocabulary
    for first in range(0, n, a.rows):
        z = e[first:first + a.rows] @ cs.T
        z[:, v:] = -math.inf
        lse = torch.logsumexp(z.double(), dim=1).float()
        rel[first:first + len(z)] = z.view(len(z), tiles, TILE).amax(dim=2) - lse[:, None]
    valid = t != IGNORE_INDEX
    count = (rel >= GROUPING_LOG).sum(1)
    rows = torch.sort(count, descending=True, stable=True).indices
    result = {"label": a.label, "n": n, "d": d, "v": v, "tiles": tiles, "rows_with_gradient": int(valid.sum()),
              "eps": []}
    for log2_eps in a.log2_eps:
        needs = ((rel >= log2_eps * math.log(2.0)) & valid[:, None])[rows]
        pad = (-n) % TILE
        needs = torch.cat([needs, torch.zeros(pad, tiles, dtype=torch.bool, device=dev)])
        blocks = needs.shape[0] // TILE
        by = {}
        for size in (128, 64, 32):
            by[size] = needs.view(blocks, TILE // size, size, tiles).any(dim=2)  # [blocks, parts, tiles]
        kept = by[128][:, 0, :]
        kept_pairs = int(kept.sum())
        halves = int((by[64] & kept[:, None, :]).sum())
        quarters = int((by[32] & kept[:, None, :]).sum())
        row = {"log2_eps": log2_eps, "pairs": blocks * tiles, "kept_pairs": kept_pairs,
               "kept_fraction": kept_pairs / (blocks * tiles),
               "kept_halves_per_pair": halves / max(2 * kept_pairs, 1),
               "kept_quarters_per_pair": quarters / max(4 * kept_pairs, 1)}
        result["eps"].append(row)
        print(f"{a.label} eps 2^{log2_eps:g}: kept {kept_pairs} of {blocks * tiles} pairs "
              f"({100 * row['kept_fraction']:.2f}%); halves needed {100 * row['kept_halves_per_pair']:.1f}% of "
              f"the kept pairs' halves, quarters {100 * row['kept_quarters_per_pair']:.1f}%", flush=True)
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
