#!/usr/bin/env python3
"""Which (token block, vocabulary tile) pairs stage 08's rule keeps, drawn.

    python3 bench/kept_map_figure.py DIR --out docs/figures/kept_map_gemma2.png \
        --json docs/figures/kept_map_gemma2.json [--label gemma2] [--rows-per-pass 512] [--cache F.npz]

DIR holds e.npy [N, D], c.npy [V, D] and targets.npy [N], as a stage's --save
writes them (for the bf16 benchmark shapes: stage08_drop_before_recompute
--n 8192 --d 2304 --v 256000 --dtype bf16 --save DIR --save-large, the
realistic generator at seed 1234, cce_bench's gemma2). No GPU: the logits
are recomputed on the CPU, one pass of rows at a time, in float32.

With the backward's bf16 tiles (128 tokens × 128 vocabulary entries) and
stage 08's rule, a pair (b, T) is kept when a row i of token block b with a
gradient has m_iT − LSE_i ≥ ln eps, m_iT the largest logit of row i in T.
Three orders of the same logits:
  1. the vocabulary and the tokens as they come;
  2. the vocabulary sorted by descending key_j = C_j · Σ_i E_i (stage 08);
  3. that, with the tokens grouped by how many tiles hold an entry ≥ 2^-12,
     most first (stage 10 groups by that count's power of two, then by the
     rarest such tile, and with the automatic eps again near the eps chosen).
The figure shows each order's map (kept pairs black), whole and its first
64 tiles; the JSON holds the kept shares. The script asserts what the figure is drawn to show: sorting keeps
fewer pairs than the natural order, grouping no more than sorting, and the
sorted order's kept pairs sit in its leading tiles (its first 64 tiles hold
most of them). Exit 1 when one fails; 2 on a bad file or flag.
Needs numpy and matplotlib.
"""

import argparse
import json
import math
import sys
from pathlib import Path

import figure_cli

TILE = 128             # the backward's bf16 tile: 128 tokens x 128 vocabulary entries
GROUPING_EXPONENT = 12  # stage 10's kGroupingExponent
ZOOM_TILES = 64         # the right-hand panels: the first tiles, where the sorted orders keep nearly all
IGNORE_INDEX = -100


PROG = "kept_map_figure.py"


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


def load_inputs(folder):
    import numpy as np
    e, c, t = figure_cli.load_stage_inputs(PROG, folder)
    return e.astype(np.float32, copy=False), c.astype(np.float32, copy=False), t


def tile_maxima(z, order, tiles):
    """[rows, tiles]: each row's largest logit per tile of 128 entries in `order` (−inf past V)."""
    import numpy as np
    rows, v = z.shape
    padded = np.full((rows, tiles * TILE), -np.inf, dtype=np.float32)
    padded[:, :v] = z if order is None else z[:, order]
    return padded.reshape(rows, tiles, TILE).max(axis=2)


def relative_maxima(e, c, order, rows_per_pass):
    """m_iT − LSE_i for the natural and the sorted vocabulary, [N, tiles] each."""
    import numpy as np
    n, v = e.shape[0], c.shape[0]
    tiles = math.ceil(v / TILE)
    natural = np.empty((n, tiles), dtype=np.float32)
    sorted_ = np.empty((n, tiles), dtype=np.float32)
    ct = np.ascontiguousarray(c.T)
    for first in range(0, n, rows_per_pass):
        z = e[first:first + rows_per_pass] @ ct  # [rows, V] float32
        top = z.max(axis=1, keepdims=True)
        lse = (top[:, 0].astype(np.float64) + np.log(np.exp((z - top).astype(np.float64)).sum(axis=1)))
        lse = lse.astype(np.float32)[:, None]
        natural[first:first + len(z)] = tile_maxima(z, None, tiles) - lse
        sorted_[first:first + len(z)] = tile_maxima(z, order, tiles) - lse
        print(f"  rows {first + len(z)} of {n}", file=sys.stderr, flush=True)
    return natural, sorted_


def kept_map(relative, valid, token_order, log_eps):
    """[token blocks, tiles]: whether some row of the block, in token_order, with a gradient needs the tile."""
    import numpy as np
    needs = (relative >= log_eps) & valid[:, None]
    needs = needs[token_order]
    n, tiles = needs.shape
    blocks = math.ceil(n / TILE)
    padded = np.zeros((blocks * TILE, tiles), dtype=bool)
    padded[:n] = needs
    return padded.reshape(blocks, TILE, tiles).any(axis=1)


def main(argv):
    parser = argparse.ArgumentParser(description="Stage 08's kept pairs in three orders, drawn (no GPU).")
    parser.add_argument("data", help="a folder with e.npy, c.npy, targets.npy (a stage's --save)")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--json", required=True, help="the kept shares, as JSON")
    parser.add_argument("--label", default="", help="the data's name in the title, e.g. gemma2")
    parser.add_argument("--eps-exponent", type=int, default=8, help="eps = 2^-K (default 8, stage 08's bf16 eps)")
    parser.add_argument("--rows-per-pass", type=int, default=512, help="rows whose logits exist at once")
    parser.add_argument("--cache", help="an .npz of m - LSE per (row, tile), both orders: read when it exists, "
                        "else written (redraws without the logits' recompute)")
    args = parser.parse_args(argv)
    if not 1 <= args.eps_exponent <= 60:
        fail(f"--eps-exponent {args.eps_exponent}: expected 1..60")
    if args.rows_per_pass < 1:
        fail(f"--rows-per-pass {args.rows_per_pass}: expected a positive count")
    try:
        import numpy as np
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as error:
        fail(f"needs numpy and matplotlib ({error})")

    e, c, targets = load_inputs(args.data)
    n, d = e.shape
    v = c.shape[0]
    valid = targets != IGNORE_INDEX
    key = c @ e[valid].sum(axis=0, dtype=np.float32)
    vocab_order = np.argsort(-key, kind="stable")  # descending, ties in index order (a stable radix sort's)
    cache = Path(args.cache) if args.cache else None
    if cache is not None and cache.exists():
        with np.load(cache) as saved:
            natural, sorted_ = saved["natural"], saved["sorted"]
        if natural.shape != (n, math.ceil(v / TILE)):
            fail(f"--cache {cache}: made from other inputs ({natural.shape})")
    else:
        natural, sorted_ = relative_maxima(e, c, vocab_order, args.rows_per_pass)
        if cache is not None:
            np.savez(cache, natural=natural, sorted=sorted_)

    log_eps = -args.eps_exponent * math.log(2.0)
    tokens_as_they_come = np.arange(n)
    counts = ((sorted_ >= -GROUPING_EXPONENT * math.log(2.0)) & valid[:, None]).sum(axis=1)
    grouped_tokens = np.argsort(-counts, kind="stable")
    maps = [
        ("vocabulary and tokens as they come", kept_map(natural, valid, tokens_as_they_come, log_eps)),
        ("vocabulary sorted by C·ΣE (stage 08)", kept_map(sorted_, valid, tokens_as_they_come, log_eps)),
        ("sorted, tokens grouped (stage 10)", kept_map(sorted_, valid, grouped_tokens, log_eps)),
    ]
    shares = [float(m.mean()) for _, m in maps]
    sorted_map = maps[1][1]
    zoom = min(ZOOM_TILES, sorted_map.shape[1])
    in_leading = float(sorted_map[:, :zoom].sum() / max(1, sorted_map.sum()))

    fig, axes = plt.subplots(3, 2, figsize=(12, 6.4), constrained_layout=True,
                             gridspec_kw={"width_ratios": [3, 1]})
    for row, ((title, kept), share) in enumerate(zip(maps, shares)):
        whole, first = axes[row]
        whole.imshow(kept, aspect="auto", interpolation="nearest", cmap="Greys", vmin=0, vmax=1)
        whole.set_title(f"{title}: {100 * share:.2f}% of the pairs kept", fontsize=10)
        whole.set_ylabel("token block")
        first.imshow(kept[:, :zoom], aspect="auto", interpolation="nearest", cmap="Greys", vmin=0, vmax=1)
        first.set_title(f"its first {zoom} tiles", fontsize=10)
    axes[-1][0].set_xlabel(f"vocabulary tile ({TILE} entries each)")
    axes[-1][1].set_xlabel("vocabulary tile")
    fig.suptitle(f"{args.label + ': ' if args.label else ''}N = {n}, D = {d}, V = {v}; "
                 f"(token block, tile) pairs kept at eps = 2^-{args.eps_exponent} in black", fontsize=11)
    figure_cli.save_png(plt, fig, args.out, dpi=100)

    record = {
        "data": args.label or str(args.data), "command": "python3 bench/kept_map_figure.py " + " ".join(argv),
        "n": n, "d": d, "v": v, "tile": TILE,
        "eps_exponent": args.eps_exponent, "grouping_exponent": GROUPING_EXPONENT,
        "token_blocks": int(sorted_map.shape[0]), "tiles": int(sorted_map.shape[1]),
        "kept_share": {"as_they_come": shares[0], "sorted": shares[1], "sorted_grouped": shares[2]},
        "zoom_tiles": zoom, "sorted_kept_in_zoom_tiles": in_leading,
    }
    Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record["kept_share"]), f"share of the sorted order's kept pairs in its first {zoom} tiles: "
          f"{in_leading:.3f}")

    claims = [
        (shares[1] < shares[0], "sorting the vocabulary keeps fewer pairs than its own order"),
        (shares[2] <= shares[1], "grouping the tokens keeps no more pairs than sorting alone"),
        (in_leading > 0.5, f"most of the sorted order's kept pairs sit in its first {zoom} tiles"),
    ]
    return figure_cli.verdict(PROG, claims)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
