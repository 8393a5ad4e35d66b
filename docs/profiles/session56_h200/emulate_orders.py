#!/usr/bin/env python3
"""Stage 10's eps choice emulated on the CPU for other orders of the rows and other grids of candidates (NumPy).

    /usr/bin/python3 emulate_orders.py OUTDIR/lm128k_pairs.npz [...] [--budget 0.022] [--seeds 4]

Reads dump_pairs_probe.py's files (<label>_pairs.npz, _bound.npz and _pairs.json). Per order of the rows (blocks of
128 rows, rows without a gradient last): a pair (block, tile) is dropped at candidate k when every row of the block
drops the tile there (level > k), its R the sum of its rows' bounds; R_k sums the dropped pairs' R over the rows with
a gradient; the choice is the first k within the budget (else the last) on three grids of eps_k = 2^-(8 + k/8):
eighths (every k), quarters (stage 10's: even k) and halves (k % 4 == 0). Orders: count (stage 10's),
minhash_perm (one and two min-hashes over random permutations of the tiles, --seeds of them, then the count),
bucket_minhash_perm (the count's power of two, most first, then one min-hash), uncommon2_perm (two min-hashes over
the hot tiles that are hot in at most half the rows, then the count), rarest_tile (the row's hot tile hot in the
fewest rows, then the count), minhash10 (session 55's branch: two 10-bit murmur min-hashes, then the count). First
it checks the count order against the dump's own numbers (kept pairs exactly; R within 1%, the bound being stored
as bfloat16): exit 1 if not.
"""
import argparse
import json
import sys
from pathlib import Path

import numpy as np

TILE = 128
# A tile is hot for a row when rel >= ln 2^-12: not dropped at k = 32 (the dump's levels count eighths; eps_32 = 2^-12).
HOT_LEVEL = 32


def bf16_to_float(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def choose(r_k, ks, budget):
    return next((k for k in ks if r_k[k] <= budget), ks[-1])


def evaluate(level, bound, valid, order, candidates):
    """R_k and kept pairs per candidate k for the rows in `order` (a permutation of all rows)."""
    n, tiles = level.shape
    pad = (-n) % TILE
    lo = np.concatenate([level[order], np.full((pad, tiles), candidates, dtype=np.uint8)])
    bo = np.concatenate([bound[order], np.zeros((pad, tiles), dtype=np.float32)])
    blocks = (n + pad) // TILE
    pair_level = lo.reshape(blocks, TILE, tiles).min(axis=1)
    pair_mis = bo.reshape(blocks, TILE, tiles).astype(np.float64).sum(axis=1)
    rows = max(int(valid.sum()), 1)
    r_k = [float(pair_mis[pair_level > k].sum()) / rows for k in range(candidates)]
    kept_k = [int((pair_level <= k).sum()) for k in range(candidates)]
    return r_k, kept_k, blocks * tiles


def stable_order(keys, valid):
    """Rows sorted by keys (a list of arrays, first the most significant; ascending), rows with a gradient first."""
    return np.lexsort([k for k in reversed(keys)] + [~valid])


def murmur10(tiles, which):
    x = ((2 * tiles.astype(np.uint64) + which + 0x9E3779B9) & 0xFFFFFFFF).astype(np.uint32)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint32(16)
        x *= np.uint32(0x85EBCA6B)
        x ^= x >> np.uint32(13)
        x *= np.uint32(0xC2B2AE35)
        x ^= x >> np.uint32(16)
    return ((x.astype(np.uint64) * 1023) >> np.uint64(32)).astype(np.int64)


def rarest_hot_tile(hot):
    """Per row: its hot tile hot in the fewest rows, as rows·tiles + tile (then the lowest index; none: last)."""
    n, tiles = hot.shape
    rarity = np.where(hot, hot.sum(axis=0)[None, :] * tiles + np.arange(tiles)[None, :], n * tiles + tiles)
    return rarity.min(axis=1)


def orders_of(level, valid, seeds):
    n, tiles = level.shape
    hot = (level <= HOT_LEVEL) & valid[:, None]
    count = hot.sum(axis=1)
    out = {"count": stable_order([-count], valid)}
    t = np.arange(tiles)
    out["minhash10"] = stable_order([np.where(hot, murmur10(t, w)[None, :], 1023).min(axis=1) for w in (0, 1)]
                                    + [-np.minimum(count, 1023)], valid)
    rows_hot = hot.sum(axis=0)  # per tile: the rows it is hot for
    out["rarest_tile"] = stable_order([rarest_hot_tile(hot), -count], valid)  # then the count
    bucket = np.floor(np.log2(count + 1.0)).astype(np.int64)
    uncommon = hot & (rows_hot[None, :] <= valid.sum() // 2)  # the tiles hot in at most half the rows
    for s in range(seeds):
        g = np.random.default_rng(1000 + s)
        p1, p2 = g.permutation(tiles), g.permutation(tiles)
        m1 = np.where(hot, p1[None, :], tiles).min(axis=1)
        m2 = np.where(hot, p2[None, :], tiles).min(axis=1)
        u1 = np.where(uncommon, p1[None, :], tiles).min(axis=1)
        u2 = np.where(uncommon, p2[None, :], tiles).min(axis=1)
        out[f"minhash_perm{s}"] = stable_order([m1, -count], valid)
        out[f"minhash2_perm{s}"] = stable_order([m1, m2, -count], valid)
        out[f"bucket_minhash_perm{s}"] = stable_order([-bucket, m1], valid)
        out[f"uncommon2_perm{s}"] = stable_order([u1, u2, -count], valid)
    return out


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="+")
    p.add_argument("--budget", type=float, default=0.022)
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--out")
    a = p.parse_args(argv)
    result = {}
    for path in a.pairs:
        path = Path(path)
        meta = json.loads(path.with_suffix(".json").read_text())
        with np.load(path) as f:
            level, valid = f["level"], f["valid"].astype(bool)
        with np.load(path.with_name(path.name.replace("_pairs.npz", "_bound.npz"))) as f:
            bound = bf16_to_float(f["bound"])
        cand = meta["candidates"]
        orders = orders_of(level, valid, a.seeds)
        r_k, kept_k, pairs = evaluate(level, bound, valid, orders["count"], cand)
        want = meta["count_order"]
        ok = kept_k == want["kept_k"] and all(abs(x - y) <= 0.01 * y + 1e-12 for x, y in zip(r_k, want["R_k"]))
        if not ok:
            print(f"{meta['label']}: the count order does not reproduce the dump's numbers: DOES NOT HOLD")
            return 1
        eighth, quarter, half = list(range(cand)), list(range(0, cand, 2)), list(range(0, cand, 4))
        rows = {}
        for name, order in orders.items():
            r_k, kept_k, pairs = evaluate(level, bound, valid, order, cand)
            rows[name] = {grid: {"log2_eps": -(8 + k / 8), "R": r_k[k], "kept": kept_k[k] / pairs}
                          for grid, ks in (("half", half), ("quarter", quarter), ("eighth", eighth))
                          for k in [choose(r_k, ks, a.budget)]}
        base = rows["count"]["half"]["kept"]
        print(f"{meta['label']} (budget {a.budget}; kept pairs against the count order on the half grid):")
        for name, r in rows.items():
            print("  %-22s " % name + "  ".join(
                f"{g} 2^{x['log2_eps']:g} R {x['R']:.4f} kept {100 * x['kept']:.2f}% ({x['kept'] / base:.3f}x)"
                for g, x in r.items()))
        result[meta["label"]] = rows
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
