#!/usr/bin/env python3
"""How dense the leading tiles of the sorted vocabulary are: what a dense head would take off the sparse plan.

    python3 bench/dense_head_probe.py DIR [DIR ...] --out probe.json [--rows-per-pass 1024]

Each DIR holds e.npy [N, D], c.npy [V, D] and targets.npy [N] (a stage's --save, or bench/lm_data.py's output).
On one CUDA GPU with PyTorch, in float32, stage 10's sparse plan's orders are rebuilt: the vocabulary sorted by
descending key_j = C_j · Σ_i E_i over the valid rows (stage 08), the tokens grouped by how many sorted tiles hold
an entry ≥ 2^-12, most first (stage 10), 128 × 128 (token block, tile) pairs. For eps = 2^-k, k = 8 .. 16, a pair
is kept when a valid row of the block has an entry ≥ eps in the tile (stage 08's rule on the exact logits; the
stage's rounded-up bf16 statistics keep a pair or two more). Per k the JSON holds the kept share, the rows' dropped
softmax mass (mean and largest), the kept share of each leading tile, and for a head of H leading tiles taken
whole by dense GEMMs (every pair of tiles [0, H)) the pairs left to the sparse plan. Its `estimate` prices the
backward's products as 3 · 2 · 128 · 128 · D FLOP per pair, the head's at --dense-tflops and the sparse pairs'
at --sparse-tflops: a model to decide whether to build a dense head, not a measurement.
Exit 1 when a claim printed fails, 2 on a bad file or flag, 77 without PyTorch or a GPU.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import figure_cli

TILE = 128
GROUPING_EXPONENT = 12  # stage 10's kGroupingExponent
EXPONENTS = range(8, 17)
IGNORE_INDEX = -100
PROG = "dense_head_probe.py"


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


HEADS = (0, 1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def head_estimates(per_tile_counts, blocks, d, dense_tflops, sparse_tflops):
    """For each head of H leading tiles (HEADS, up to the tile count): its pairs (H · blocks, all taken by dense
    GEMMs), the kept pairs after it (left to the sparse plan), and the products' estimated ms."""
    flop_per_pair = 3 * 2 * TILE * TILE * d
    rows = []
    for h in (h for h in HEADS if h <= len(per_tile_counts)):
        head_pairs, sparse_pairs = h * blocks, sum(per_tile_counts[h:])
        ms = (head_pairs / (dense_tflops * 1e12) + sparse_pairs / (sparse_tflops * 1e12)) * flop_per_pair * 1e3
        rows.append({"head_tiles": h, "head_pairs": head_pairs, "sparse_pairs": sparse_pairs,
                     "estimate_ms": round(ms, 3)})
    return rows


def tile_tables(torch, e, c_sorted, tiles, rows_per_pass):
    """[N, tiles] each: the row's largest entry per sorted tile relative to its LSE (log space), and the tile's
    softmax mass."""
    n, v = e.shape[0], c_sorted.shape[0]
    relative = torch.empty((n, tiles), dtype=torch.float32, device=e.device)
    mass = torch.empty((n, tiles), dtype=torch.float32, device=e.device)
    pad = tiles * TILE - v
    for first in range(0, n, rows_per_pass):
        z = e[first:first + rows_per_pass] @ c_sorted.T
        lse = torch.logsumexp(z.double(), dim=1, keepdim=True).float()
        z = torch.nn.functional.pad(z - lse, (0, pad), value=-math.inf).view(len(z), tiles, TILE)
        relative[first:first + len(z)] = z.amax(dim=2)
        mass[first:first + len(z)] = z.exp().sum(dim=2)
    return relative, mass


def probe(folder, args, torch, np):
    e_host, c_host, t_host = figure_cli.load_stage_inputs(PROG, folder)
    device = torch.device("cuda")
    e = torch.from_numpy(e_host.astype(np.float32, copy=False)).to(device)
    c = torch.from_numpy(c_host.astype(np.float32, copy=False)).to(device)
    targets = torch.from_numpy(t_host.astype(np.int64, copy=False)).to(device)
    n, d = e.shape
    v = c.shape[0]
    tiles, blocks = math.ceil(v / TILE), math.ceil(n / TILE)
    valid = targets != IGNORE_INDEX
    torch.backends.cuda.matmul.allow_tf32 = False
    key = c @ e[valid].sum(dim=0)
    order = torch.sort(-key, stable=True).indices
    relative, mass = tile_tables(torch, e, c[order], tiles, args.rows_per_pass)
    del c
    counts = ((relative >= -GROUPING_EXPONENT * math.log(2.0)) & valid[:, None]).sum(dim=1)
    grouped = torch.sort(-counts, stable=True).indices
    relative, mass, valid_g = relative[grouped], mass[grouped], valid[grouped]
    pad_rows = blocks * TILE - n

    per_k = []
    for k in EXPONENTS:
        needs = (relative >= -k * math.log(2.0)) & valid_g[:, None]
        kept = torch.nn.functional.pad(needs, (0, 0, 0, pad_rows)).view(blocks, TILE, tiles).any(dim=1)
        kept_rows = kept.repeat_interleave(TILE, dim=0)[:n]
        dropped = (mass * (~kept_rows)).sum(dim=1)[valid_g]
        per_tile_counts = [int(x) for x in kept.sum(dim=0).cpu().tolist()]
        per_tile = [count / blocks for count in per_tile_counts]  # each tile's kept share of the token blocks
        kept_pairs = sum(per_tile_counts)
        rows = head_estimates(per_tile_counts, blocks, d, args.dense_tflops, args.sparse_tflops)
        best = min(rows, key=lambda r: r["estimate_ms"])
        per_k.append({
            "eps_exponent": k, "kept_share": kept_pairs / (blocks * tiles), "kept_pairs": kept_pairs,
            "dropped_mass_mean": float(dropped.mean()), "dropped_mass_max": float(dropped.max()),
            "leading_tile_kept_share": [round(float(x), 4) for x in per_tile[:64]],
            "tiles_kept_by_half_the_blocks": sum(1 for x in per_tile if x >= 0.5),
            "heads": rows, "best_head": best,
        })
        print(f"  {Path(folder).name} 2^-{k}: kept {100 * kept_pairs / (blocks * tiles):.2f}%, dropped mass mean "
              f"{float(dropped.mean()):.4f} max {float(dropped.max()):.4f}; tiles kept by half the blocks "
              f"{per_k[-1]['tiles_kept_by_half_the_blocks']}; estimate sparse alone {rows[0]['estimate_ms']:.2f} ms, "
              f"best head {best['head_tiles']} tiles {best['estimate_ms']:.2f} ms", flush=True)
    return {"data": str(folder), "n": n, "d": d, "v": v, "tiles": tiles, "token_blocks": blocks, "per_eps": per_k}


def main(argv):
    parser = argparse.ArgumentParser(description="Kept pairs per leading sorted tile, and a dense head's estimate.")
    parser.add_argument("data", nargs="+", help="folders with e.npy, c.npy, targets.npy")
    parser.add_argument("--out", required=True, help="the JSON to write")
    parser.add_argument("--rows-per-pass", type=int, default=1024, help="rows whose logits exist at once")
    parser.add_argument("--dense-tflops", type=float, default=700.0, help="the head's GEMMs' rate (an estimate)")
    parser.add_argument("--sparse-tflops", type=float, default=300.0, help="the kept pairs' rate (an estimate)")
    args = parser.parse_args(argv)
    if args.rows_per_pass < 1 or args.dense_tflops <= 0 or args.sparse_tflops <= 0:
        fail("--rows-per-pass, --dense-tflops and --sparse-tflops must be positive")
    try:
        import numpy as np
        import torch
    except ImportError as error:
        print(f"{PROG}: SKIPPED, needs numpy and torch ({error})")
        return 77
    if not torch.cuda.is_available():
        print(f"{PROG}: SKIPPED, no CUDA GPU")
        return 77
    record = {"command": "python3 bench/dense_head_probe.py " + " ".join(argv), "gpu": torch.cuda.get_device_name(),
              "dense_tflops": args.dense_tflops, "sparse_tflops": args.sparse_tflops,
              "shapes": [probe(folder, args, torch, np) for folder in args.data]}
    Path(args.out).write_text(json.dumps(record, indent=1) + "\n")
    # The claims printed above are the measured tables themselves; what must hold for them to mean anything:
    ok = True
    for shape in record["shapes"]:
        shares = [row["kept_share"] for row in shape["per_eps"]]
        if any(b < a for a, b in zip(shares, shares[1:])):
            print(f"{PROG}: FAILED: {shape['data']}: a smaller eps keeps fewer pairs", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
