#!/usr/bin/env python3
"""Stage 06's backward with atomics, drawn at a small made-up shape.

    /usr/bin/python3 bench/atomic_backward_figure.py [--out docs/figures/atomic_backward.png]

No GPU and no data: the figure is a schematic of fused_backward_kernel
(stages/06_fused_backward/fused_backward.cu) on 4 token blocks × 6 vocabulary
blocks. One tile, one thread block: RowGradientInputs::load (the rows' LSE,
g and t), the tile's logits recomputed, store_tile_gradient
(backward_tile.cuh) turning them into S, then BackwardProductsBf16::run
(common/tile/backward_products.cuh): per chunk of 64 columns of D,
dE_acc[token block] += S·C[vocabulary block] and dC_acc[vocabulary block] +=
Sᵀ·E[token block], added with fp32 atomics. All tiles of a token block add
into the same rows of dE_acc, all tiles of a vocabulary block into the same
rows of dC_acc. cast_kernel then rounds both to bf16. The figure gives the
atomic traffic as stages/06_fused_backward/WORKLOG.md estimates it:
2·128·D·4 bytes per tile, 8·N·V·D/128 bytes in all.

The script checks what the figure claims, and exits 1 (DOES NOT HOLD) when
one fails:
  - the tile and the chunk are the code's: kBM = kBN = 128 and kChunk = 64
    in BackwardProductsBf16;
  - on small random E, C and t in float64 (numpy; sizes that are not
    multiples of the made-up blocks of 8, ignored tokens, with and without a
    softcap), done tile by tile as the kernel does it, the tiles taken in a
    random order: the sum of every tile's S·C and Sᵀ·E chunks is the dense
    dE = S_full·C and dC = S_fullᵀ·E within 1e-12, where S_full =
    g·(softmax − onehot)·softcap' comes from the full LSE;
  - each row of dE_acc receives one partial per vocabulary block, each row
    of dC_acc one per token block, and a full tile adds 2·BM·D values.
S is not rounded to bf16 here: the check is of the tiling, not of rounding.
Exit 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import re
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
PRODUCTS = REPO / "common" / "tile" / "backward_products.cuh"
DEFAULT_OUT = REPO / "docs" / "figures" / "atomic_backward.png"
TOLERANCE = 1e-12
IGNORE_INDEX = -100

# The figure's made-up grid, and the tile it follows.
TOKEN_BLOCKS, VOCAB_BLOCKS = 4, 6
TILE_B, TILE_T = 1, 3
# The code's tile and chunk (checked against backward_products.cuh).
KERNEL_BM, KERNEL_CHUNK = 128, 64
# Gemma-2's shape, for the traffic in the figure.
GEMMA2 = (8192, 2304, 256000)

# The numerical check: the same 4 × 6 grid with blocks of 8 rows and chunks of 4 columns of D.
CHECK_BM = CHECK_BN = 8
CHECK_CHUNK = 4
CHECK_N, CHECK_D, CHECK_V = 29, 11, 45   # ⌈29/8⌉ = 4 token blocks, ⌈45/8⌉ = 6 vocabulary blocks
CHECK_IGNORED = [3, 17, 28]              # ignored tokens, none a whole block
CHECK_SOFTCAPS = [0.0, 2.5]

PROG = "atomic_backward_figure.py"
Parser = figure_cli.parser_class(PROG)


def kernel_constants():
    """kBM, kBN and kChunk of BackwardProductsBf16, read from backward_products.cuh (None when not found)."""
    text = PRODUCTS.read_text()
    struct = text[text.find("struct BackwardProductsBf16"):]
    match = re.search(r"static constexpr int kBM = (\d+), kBN = (\d+), kChunk = (\d+)", struct)
    return tuple(int(x) for x in match.groups()) if match else None


def softcapped(logits, softcap):
    import numpy as np
    return softcap * np.tanh(logits / softcap) if softcap > 0 else logits


def softcap_derivative(z, softcap):
    """dz/dl through z, as device_math.cuh writes it: 1 − (z/s)², or 1."""
    import numpy as np
    return 1.0 - (z / softcap) ** 2 if softcap > 0 else np.ones_like(z)


def make_inputs(seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    e = rng.normal(0.0, 0.7, (CHECK_N, CHECK_D))
    c = rng.normal(0.0, 0.7, (CHECK_V, CHECK_D))
    t = rng.integers(0, CHECK_V, CHECK_N)
    t[CHECK_IGNORED] = IGNORE_INDEX
    valid = t != IGNORE_INDEX
    g = np.where(valid, 1.0 / valid.sum(), 0.0)   # `mean`, upstream gradient 1
    return e, c, t, g


def dense(e, c, t, g, softcap):
    """LSE, S_full = g·(softmax − onehot)·softcap', dE = S_full·C and dC = S_fullᵀ·E: the whole [N, V]."""
    import numpy as np
    z = softcapped(e @ c.T, softcap)
    top = z.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))[:, 0]
    onehot = np.zeros_like(z)
    rows = np.flatnonzero(t != IGNORE_INDEX)
    onehot[rows, t[rows]] = 1.0
    s_full = g[:, None] * (np.exp(z - lse[:, None]) - onehot) * softcap_derivative(z, softcap)
    return lse, s_full @ c, s_full.T @ e


def tile_order(token_blocks, vocab_blocks, rng):
    """Every (token block, vocabulary block) tile once, in a random order: atomics land in any order."""
    tiles = [(b, v) for b in range(token_blocks) for v in range(vocab_blocks)]
    return [tiles[i] for i in rng.permutation(len(tiles))]


def tiled(e, c, t, g, lse, softcap, order):
    """fused_backward_kernel, tile by tile in `order`: returns dE_acc, dC_acc, the adds per row of each,
    and the values each tile adds."""
    import numpy as np
    n, d = e.shape
    v = c.shape[0]
    de_acc, dc_acc = np.zeros((n, d)), np.zeros((v, d))
    de_adds, dc_adds = np.zeros(n, dtype=int), np.zeros(v, dtype=int)
    values = {}
    for b, vb in order:
        rows = np.arange(b * CHECK_BM, min((b + 1) * CHECK_BM, n))        # rows past N: not added
        cols = np.arange(vb * CHECK_BN, min((vb + 1) * CHECK_BN, v))      # columns past V: S = 0
        if not np.any(g[rows] != 0):   # RowGradientInputs::load: every token ignored, the block returns
            continue
        z = softcapped(e[rows] @ c[cols].T, softcap)                       # the tile, recomputed
        onehot = (t[rows][:, None] == cols[None, :]).astype(float)
        s = g[rows][:, None] * (np.exp(z - lse[rows][:, None]) - onehot) * softcap_derivative(z, softcap)
        added = 0
        for d0 in range(0, d, CHECK_CHUNK):                                # the chunk loop over D
            k = slice(d0, min(d0 + CHECK_CHUNK, d))
            de_acc[rows, k] += s @ c[cols, k]
            dc_acc[cols, k] += s.T @ e[rows, k]
            added += (len(rows) + len(cols)) * (k.stop - k.start)
        de_adds[rows] += 1
        dc_adds[cols] += 1
        values[(b, vb)] = added
    return de_acc, dc_acc, de_adds, dc_adds, values


def claims(seed=6):
    """(holds, what) for each thing the figure shows."""
    import numpy as np
    constants = kernel_constants()
    out = [(constants == (KERNEL_BM, KERNEL_BM, KERNEL_CHUNK),
            f"BackwardProductsBf16 has kBM = kBN = {KERNEL_BM} and kChunk = {KERNEL_CHUNK} (found {constants})")]
    rng = np.random.default_rng(seed)
    token_blocks, vocab_blocks = math.ceil(CHECK_N / CHECK_BM), math.ceil(CHECK_V / CHECK_BN)
    out.append(((token_blocks, vocab_blocks) == (TOKEN_BLOCKS, VOCAB_BLOCKS),
                f"the check's grid is the figure's {TOKEN_BLOCKS} × {VOCAB_BLOCKS}"))
    errors = []
    for softcap in CHECK_SOFTCAPS:
        e, c, t, g = make_inputs(seed)
        lse, de, dc = dense(e, c, t, g, softcap)
        de_acc, dc_acc, de_adds, dc_adds, values = tiled(e, c, t, g, lse, softcap,
                                                        tile_order(token_blocks, vocab_blocks, rng))
        de_error, dc_error = np.abs(de_acc - de).max(), np.abs(dc_acc - dc).max()
        errors.append((softcap, de_error, dc_error))
        where = f"softcap {softcap:g}"
        full = [added for (b, vb), added in values.items()
                if (b + 1) * CHECK_BM <= CHECK_N and (vb + 1) * CHECK_BN <= CHECK_V]
        out += [
            (de_error <= TOLERANCE,
             f"the tiles' S·C partials sum to the dense S_full·C ({where}, error {de_error:.1e})"),
            (dc_error <= TOLERANCE,
             f"the tiles' Sᵀ·E partials sum to the dense S_fullᵀ·E ({where}, error {dc_error:.1e})"),
            (np.all(de_adds == vocab_blocks),
             f"each dE_acc row receives one partial per vocabulary block, {vocab_blocks} ({where})"),
            (np.all(dc_adds == token_blocks),
             f"each dC_acc row receives one partial per token block, {token_blocks} ({where})"),
            (len(full) > 0 and all(added == 2 * CHECK_BM * CHECK_D for added in full),
             f"a full tile adds 2·BM·D values ({where})"),
        ]
    return out, errors


def traffic(n, d, v, bm=KERNEL_BM):
    """The atomic traffic: per tile 2·BM·D fp32, over ⌈N/BM⌉·⌈V/BM⌉ tiles."""
    per_tile = 2 * bm * d * 4
    tiles = math.ceil(n / bm) * math.ceil(v / bm)
    return per_tile, tiles, per_tile * tiles


def draw(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    de_color, dc_color, tile_color = "#1f78b4", "#d95f02", "#fdd49e"
    de_tint, dc_tint, note = "#dbe9f6", "#fde3cf", "#444444"
    input_fill, input_used, idle = "#e6e6e6", "#a9a9a9", "#8a8a8a"
    width, height = 20.0, 18.6
    cs = 1.15                                  # a grid cell: one 128 × 128 tile
    x0, y0 = 3.8, 5.5                          # the grid's top-left corner (y grows downwards)
    gx1, gy1 = x0 + VOCAB_BLOCKS * cs, y0 + TOKEN_BLOCKS * cs
    de_x0, de_x1 = gx1 + 2.4, gx1 + 4.4        # dE_acc's bars (width: D)
    dc_y0, dc_y1 = gy1 + 2.6, gy1 + 4.4        # dC_acc's bars (height: D)
    b_, t_ = TILE_B, TILE_T

    fig, ax = figure_cli.drawing_area(plt, width, height)
    ax.text(width / 2, 0.5, "Stage 06's backward: every tile adds two partial products into shared fp32 rows",
            ha="center", va="center", fontsize=13, weight="bold")
    ax.text(width / 2, 1.1, f"a made-up shape: {TOKEN_BLOCKS} token blocks × {VOCAB_BLOCKS} vocabulary blocks "
            "of 128 rows; one thread block per tile", ha="center", va="center", fontsize=10.5, color=note)

    def rect(x, y, w, h, **kw):
        ax.add_patch(Rectangle((x, y), w, h, **kw))

    # the inputs: C above the grid (one column per vocabulary block), E left of it (one row per token block)
    cy0, cy1 = y0 - 2.3, y0 - 0.4
    ax.text(x0 + VOCAB_BLOCKS * cs / 2, cy0 - 0.35, "C [V × D], drawn as columns: $C_T$ = 128 rows of C",
            ha="center", va="center", fontsize=10, color=note)
    for vb in range(VOCAB_BLOCKS):
        x = x0 + vb * cs
        rect(x + 0.12, cy0, cs - 0.24, cy1 - cy0, facecolor=input_used if vb == t_ else input_fill,
             edgecolor="#7f7f7f", lw=0.8)
        ax.text(x + cs / 2, (cy0 + cy1) / 2, f"$C_{vb}$", ha="center", va="center", fontsize=12)
    ex0, ex1 = x0 - 2.3, x0 - 0.4
    ax.text(ex0 - 0.35, y0 + TOKEN_BLOCKS * cs / 2, "E [N × D]: $E_b$ = 128 rows of E", rotation=90,
            ha="center", va="center", fontsize=10, color=note)
    for b in range(TOKEN_BLOCKS):
        y = y0 + b * cs
        rect(ex0, y + 0.12, ex1 - ex0, cs - 0.24, facecolor=input_used if b == b_ else input_fill,
             edgecolor="#7f7f7f", lw=0.8)
        ax.text((ex0 + ex1) / 2, y + cs / 2, f"$E_{b}$", ha="center", va="center", fontsize=12)

    # the grid of tiles: token block b_'s row tinted blue, vocabulary block t_'s column orange
    for b in range(TOKEN_BLOCKS):
        for vb in range(VOCAB_BLOCKS):
            face = {(True, True): tile_color, (True, False): de_tint, (False, True): dc_tint,
                    (False, False): "white"}[(b == b_, vb == t_)]
            rect(x0 + vb * cs + 0.04, y0 + b * cs + 0.04, cs - 0.08, cs - 0.08, facecolor=face,
                 edgecolor="#9a9a9a", lw=0.8, zorder=1)
    tx, ty = x0 + t_ * cs, y0 + b_ * cs
    rect(tx + 0.02, ty + 0.02, cs - 0.04, cs - 0.04, fill=False, edgecolor="black", lw=2.6, zorder=6)
    ax.text(tx + cs - 0.1, ty + cs - 0.08, "S", ha="right", va="bottom", fontsize=12, style="italic", zorder=7)

    # dE_acc: one bar per token block, right of the grid
    ax.text((de_x0 + de_x1) / 2, gy1 + 0.05, "$dE_{acc}$ [N × D] fp32:\n$dE_b$ = the 128 rows of token block b",
            ha="center", va="top", fontsize=10.5, color=de_color, linespacing=1.3)
    for b in range(TOKEN_BLOCKS):
        y, used = y0 + b * cs, b == b_
        rect(de_x0, y + 0.12, de_x1 - de_x0, cs - 0.24, facecolor=de_tint if used else "#f4f4f4",
             edgecolor=de_color if used else "#b0b0b0", lw=2.2 if used else 0.8, zorder=3)
        ax.text((de_x0 + de_x1) / 2, y + cs / 2, f"$dE_{b}$", ha="center", va="center", fontsize=12,
                color="black" if used else idle, zorder=4)
    # dC_acc: one bar per vocabulary block, below the grid
    ax.text(x0 - 0.3, (dc_y0 + dc_y1) / 2,
            "$dC_{acc}$ [V × D] fp32,\ndrawn as columns:\n$dC_T$ = the 128 rows\nof vocabulary block T",
            ha="right", va="center", fontsize=10.5, color=dc_color)
    for vb in range(VOCAB_BLOCKS):
        x, used = x0 + vb * cs, vb == t_
        rect(x + 0.12, dc_y0, cs - 0.24, dc_y1 - dc_y0, facecolor=dc_tint if used else "#f4f4f4",
             edgecolor=dc_color if used else "#b0b0b0", lw=2.2 if used else 0.8, zorder=3)
        ax.text(x + cs / 2, (dc_y0 + dc_y1) / 2, f"$dC_{vb}$", ha="center", va="center", fontsize=12,
                color="black" if used else idle, zorder=4)

    def arrow(start, end, color, mine):
        ax.plot([start[0]], [start[1]], "o", color=color, ms=5.5 if mine else 4, zorder=8)
        ax.annotate("", xy=end, xytext=start, zorder=8,
                    arrowprops=dict(arrowstyle="-|>", color=color, lw=2.6 if mine else 1.1,
                                    mutation_scale=14 if mine else 9, shrinkA=0, shrinkB=0))

    # the adds into dE_b_: one from every tile of row b_, converging on the same rows
    row_top = y0 + b_ * cs
    for vb in range(VOCAB_BLOCKS):
        start = (x0 + vb * cs + cs * 0.62, row_top + 0.22 + vb * (cs - 0.44) / (VOCAB_BLOCKS - 1))
        end = (de_x0 - 0.03, row_top + cs / 2 + (vb - (VOCAB_BLOCKS - 1) / 2) * 0.07)
        arrow(start, end, de_color, vb == t_)
    ax.text(de_x1 + 0.25, row_top + cs / 2, f"{VOCAB_BLOCKS} adds into $dE_{b_}$:\none per vocabulary\nblock",
            ha="left", va="center", fontsize=10, color=de_color, linespacing=1.2)
    # the adds into dC_t_: one from every tile of column t_
    col_left = x0 + t_ * cs
    for b in range(TOKEN_BLOCKS):
        start = (col_left + 0.18 + b * (cs - 0.36) / (TOKEN_BLOCKS - 1), y0 + b * cs + cs * 0.8)
        end = (col_left + cs / 2 + (b - (TOKEN_BLOCKS - 1) / 2) * 0.1, dc_y0 - 0.03)
        arrow(start, end, dc_color, b == b_)
    ax.text(col_left + cs / 2, dc_y1 + 0.2, f"{TOKEN_BLOCKS} adds into $dC_{t_}$:\none per token block",
            ha="center", va="top", fontsize=10, color=dc_color, linespacing=1.2)

    # one tile's work, top right
    sx, sy = gx1 + 0.5, 1.85
    steps = [
        ("black", "One tile = one thread block:"),
        (note, "1. load $LSE_i$, $g_i$, $t_i$ of its 128 rows (LSE from the forward)"),
        (note, f"2. recompute the logits $Z = E_{b_}\\,C_{t_}^T$ (128 × 128)"),
        (note, "3. $S = g \\cdot (e^{Z - LSE} - \\mathrm{onehot}(t)) \\cdot \\mathrm{softcap}'(Z)$"),
        (note, "4. per chunk of 64 columns of D, with fp32 atomicAdd:"),
        (de_color, f"     $dE_{b_}$ += $S \\cdot C_{t_}$"),
        (dc_color, f"     $dC_{t_}$ += $S^T \\cdot E_{b_}$"),
    ]
    for i, (color, line) in enumerate(steps):
        ax.text(sx, sy + i * 0.48, line, ha="left", va="center", fontsize=10, color=color,
                weight="bold" if i == 0 else "normal")

    # the legend, right of dC_acc
    legend = [
        Patch(facecolor=tile_color, edgecolor="black", lw=2, label="the tile followed: its S, never in global memory"),
        Patch(facecolor=de_tint, edgecolor="#9a9a9a", label=f"the tiles of token block {b_}"),
        Patch(facecolor=dc_tint, edgecolor="#9a9a9a", label=f"the tiles of vocabulary block {t_}"),
        Line2D([0], [0], color=de_color, lw=1.4, marker="o", ms=4,
               label="a tile's $S \\cdot C_T$ added into $dE_b$"),
        Line2D([0], [0], color=dc_color, lw=1.4, marker="o", ms=4,
               label="a tile's $S^T \\cdot E_b$ added into $dC_T$"),
    ]
    ax.legend(handles=legend, loc="upper left", fontsize=10, frameon=False, handlelength=1.8,
              bbox_to_anchor=((gx1 + 0.9) / width, 1 - (gy1 + 0.9) / height), labelspacing=0.6)

    # the traffic and the cast, at the bottom
    n, d, v = GEMMA2
    per_tile, tiles, total = traffic(n, d, v)
    bottom = [
        ("black", "Atomic traffic: 2 · 128 · D · 4 bytes per tile "
                  "(128 × D fp32 into $dE_b$, as many into $dC_T$)."),
        (note, "Over all ⌈N/128⌉ · ⌈V/128⌉ tiles: 8 · N · V · D / 128 bytes. At Gemma-2's shape (N = "
               f"{n}, D = {d}, V = {v}):"),
        (note, f"{per_tile / 1e6:.2f} MB per tile × {tiles} tiles ≈ {total / 1e9:.0f} GB of fp32 atomic adds, "
               "all through L2."),
        ("black", "After the last tile, cast_kernel rounds $dE_{acc}$ and $dC_{acc}$ to bf16 dE and dC."),
    ]
    by = dc_y1 + 1.55
    for i, (color, line) in enumerate(bottom):
        ax.text(0.5, by + i * 0.55, line, ha="left", va="center", fontsize=10.5, color=color)
    figure_cli.save_png(plt, fig, out)


def main(argv):
    parser = Parser(description="Stage 06's tiles and their atomic adds, drawn and checked in float64 (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)
    found, errors = claims()
    draw(out)
    per_tile, tiles, total = traffic(*GEMMA2)
    print(f"{out}: {TOKEN_BLOCKS} token blocks × {VOCAB_BLOCKS} vocabulary blocks; "
          + "; ".join(f"softcap {s:g}: dE error {a:.1e}, dC error {b:.1e}" for s, a, b in errors)
          + f"; gemma2: {per_tile} bytes per tile × {tiles} tiles = {total / 1e9:.1f} GB")
    return figure_cli.verdict(PROG, found)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
