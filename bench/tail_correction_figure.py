#!/usr/bin/env python3
"""Stage 08's decision and tail correction (README points 1, 4 and 5) on one made-up token block.

    /usr/bin/python3 bench/tail_correction_figure.py [--out docs/figures/tail_correction.png] [--seed 4]

No GPU, no data: one token block of N = 8 rows, D = 12, a vocabulary of V = 160 already in sorted order, cut into
10 tiles of 16 entries. C's rows share a direction c0 (the case where stage 07's dropped terms add up) and lean
less and less towards the rows' common direction along the order, so the large logits sit in the first tiles. In
float64, as stages/08_drop_before_recompute computes them (without the bf16 rounding of the statistics):
  - per row i and tile T: m_iT = max_{j∈T} z_ij, s_iT = Σ_{j∈T} exp(z_ij − m_iT);
  - the pair (block, T) is dropped when every row has m_iT − LSE_i < ln eps (eps = 2^-8);
  - M_iT = s_iT·exp(m_iT − LSE_i) − [t_i ∈ T]·p_{i,t_i}; dE_i += g_i Σ_{T dropped} M_iT·C̄_T (C̄_T the tile's mean
    row), dC_j += Σ_i g_i M_iT E_i / |T| for j ∈ T (the even split);
  - a dropped tile's target: a_i = g_i (p_{i,t_i} − 1), dE_i += a_i C_{t_i}, dC_{t_i} += a_i E_i, exactly.

The figure shows (a) one row's logits in sorted order, each tile's max m_iT, the line LSE_i + ln eps below which a
tile's every entry is dropped, the dropped tiles shaded; (b) the row's mass per tile, M_iT, summed over the dropped
tiles; (c) dE's and dC's relative L2 error of the block's gradient: dropped alone (stage 07's loss), and dropped
then corrected (stage 08).

The script asserts what the figure shows: every p_ij ≤ exp(m_iT − LSE_i); in a dropped tile every entry but the
target's has |p − [j = t]| < eps; Σ_{j∈T} p_ij = s_iT·exp(m_iT − LSE_i) (1e-12); Σ_{j∈T} p_ij C_j = M_iT·C̄_T +
Σ_j ε_ij δ_j (1e-12); the correction lowers dE's error at least twofold and dC's below the uncorrected one;
with C's rows equal within each tile (δ = 0) the dE correction is exact (1e-12), and with p even within each
tile (ε = 0) and no target in a dropped tile so is dC's even split. Exit 1 (DOES NOT HOLD) when one fails; 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "tail_correction.png"
N, D, TILE, TILES = 8, 12, 16, 10
V = TILE * TILES
EPS = 2.0 ** -8
SHOWN_ROW = 0

PROG = "tail_correction_figure.py"
Parser = figure_cli.parser_class(PROG)


def make_block(seed):
    """E [N, D], C [V, D] in sorted order, targets [N] (one of them in a dropped tile)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    v = rng.normal(0.0, 1.0, D)
    v *= 1.0 / np.linalg.norm(v)
    c0 = rng.normal(0.0, 1.0, D)
    c0 -= (c0 @ v) * v                  # the shared direction, orthogonal to the rows' common one
    c0 *= 1.5 / np.linalg.norm(c0)
    e = 4.0 * v + rng.normal(0.0, 0.35, (N, D))
    lean = np.linspace(2.4, -1.2, V) + rng.normal(0.0, 0.25, V)  # along the sorted order, less and less
    c = c0 + lean[:, None] * v + rng.normal(0.0, 0.3, (V, D))
    z = e @ c.T
    targets = np.array([int(np.argmax(z[i, :2 * TILE])) for i in range(N)])
    targets[N - 1] = 7 * TILE + 3      # one target in the tail
    return e, c, targets


def softmax_rows(z):
    import numpy as np
    top = z.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))[:, 0]
    return np.exp(z - lse[:, None]), lse


def statistics(z, lse):
    """m [N, TILES], s [N, TILES]."""
    import numpy as np
    tiles = z.reshape(N, TILES, TILE)
    m = tiles.max(axis=2)
    s = np.exp(tiles - m[:, :, None]).sum(axis=2)
    return m, s


def tail_mass(p, lse, m, s, targets):
    """M_iT: each tile's softmax mass from the statistics, less the target's own entry, clamped at 0."""
    import numpy as np
    mass = s * np.exp(m - lse[:, None])                             # Σ_{j∈T} p_ij
    rows = np.arange(N)
    mass[rows, targets // TILE] -= p[rows, targets]
    return np.maximum(mass, 0.0)


def tile_means(c):
    """C̄_T [TILES, D]: each tile's mean row."""
    return c.reshape(TILES, TILE, D).mean(axis=1)


def gradients(e, c, targets, eps=None):
    """The exact gradient, the one that drops the block's dropped tiles, and the corrected one, with what the
    decision and the correction used."""
    import numpy as np
    z = e @ c.T
    p, lse = softmax_rows(z)
    g = np.full(N, 1.0 / N)
    rows = np.arange(N)
    u = p.copy()
    u[rows, targets] -= 1.0
    s_exact = g[:, None] * u
    m, s = statistics(z, lse)
    dropped = np.all(m - lse[:, None] < math.log(eps or EPS), axis=0)  # [TILES]: the block's decision
    drop_cols = np.repeat(dropped, TILE)
    kept = s_exact.copy()
    kept[:, drop_cols] = 0.0                                        # recomputed only where kept
    mass = tail_mass(p, lse, m, s, targets)
    target_tile = targets // TILE
    c_mean = tile_means(c)
    weight = g[:, None] * mass * dropped[None, :]                   # g_i M_iT on dropped tiles
    a = np.where(dropped[target_tile], g * (p[rows, targets] - 1.0), 0.0)
    de_drop = kept @ c
    dc_drop = kept.T @ e
    de_fix = de_drop + weight @ c_mean + a[:, None] * c[targets]
    dc_fix = dc_drop + np.repeat(weight.T @ e / TILE, TILE, axis=0)
    for i in rows:
        dc_fix[targets[i]] += a[i] * e[i]
        dc_drop[targets[i]] += a[i] * e[i]       # stage 07 keeps the target's tile: only the tail is lost
        de_drop[i] += a[i] * c[targets[i]]
    return {"z": z, "p": p, "lse": lse, "m": m, "s": s, "dropped": dropped, "mass": mass, "c_mean": c_mean,
            "de": s_exact @ c, "dc": s_exact.T @ e, "de_drop": de_drop, "dc_drop": dc_drop, "de_fix": de_fix,
            "dc_fix": dc_fix}


def rel(a, b):
    import numpy as np
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def claims(e, c, targets):
    """(holds, what) for each thing the figure shows."""
    import numpy as np
    r = gradients(e, c, targets)
    p, lse, m, s = r["p"], r["lse"], r["m"], r["s"]
    rows = np.arange(N)
    bound = np.repeat(np.exp(m - lse[:, None]), TILE, axis=1)
    u = p.copy()
    u[rows, targets] -= 1.0
    off_target = np.ones((N, V), dtype=bool)
    off_target[rows, targets] = False
    in_dropped = np.repeat(r["dropped"], TILE)[None, :] & off_target
    tile_sum = p.reshape(N, TILES, TILE).sum(axis=2)
    identity = []
    means = tile_means(c)
    for i in rows:
        for t in range(TILES):
            cols = slice(t * TILE, (t + 1) * TILE)
            pt, ct = p[i, cols], c[cols]
            eps_ = pt - pt.mean()
            delta = ct - means[t]
            identity.append(np.allclose(pt @ ct, pt.sum() * means[t] + eps_ @ delta, rtol=1e-12, atol=1e-15))
    # δ = 0: every row of a tile equal, so every logit of a tile too, per row (ε = 0). The even split of dC is
    # exact only where no target sits in a dropped tile (M_iT leaves the target out of |T| entries).
    c_flat = np.repeat(c.reshape(TILES, TILE, D).mean(axis=1), TILE, axis=0)
    flat_c = gradients(e, c_flat, targets)
    head_targets = targets % TILE
    flat_head = gradients(e, c_flat, head_targets)
    return [
        (bool(np.all(p <= bound * (1 + 1e-12))), "every p_ij ≤ exp(m_iT − LSE_i), the tile's bound"),
        (bool(np.all(np.abs(u[in_dropped]) < EPS)),
         "in a dropped tile every entry but the target's has |p − [j = t]| < eps"),
        (np.allclose(tile_sum, s * np.exp(m - lse[:, None]), rtol=1e-12, atol=0.0),
         "Σ_{j∈T} p_ij = s_iT·exp(m_iT − LSE_i) (1e-12)"),
        (all(identity), "Σ_{j∈T} p_ij C_j = M_iT·C̄_T + Σ_j ε_ij δ_j (1e-12)"),
        (bool(r["dropped"].sum() >= 3) and rel(r["de_fix"], r["de"]) * 2 <= rel(r["de_drop"], r["de"]),
         "the correction lowers dE's error at least twofold"),
        (rel(r["dc_fix"], r["dc"]) < rel(r["dc_drop"], r["dc"]), "the correction lowers dC's error"),
        (bool(flat_c["dropped"].any()) and rel(flat_c["de_fix"], flat_c["de"]) <= 1e-12,
         "with C's rows equal within each tile (δ = 0) dE's correction is exact (1e-12)"),
        (bool(flat_head["dropped"].any()) and rel(flat_head["dc_fix"], flat_head["dc"]) <= 1e-12,
         "with p even within each tile (ε = 0) and no target in a dropped tile, dC's even split is exact (1e-12)"),
    ]


def draw(out, e, c, targets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    r = gradients(e, c, targets)
    i = SHOWN_ROW
    z, lse, m, dropped = r["z"][i], r["lse"][i], r["m"][i], r["dropped"]
    cols = np.arange(V)
    z_color, m_color, lse_color, eps_color, drop_color, kept_color = "#4d4d4d", "#d95f02", "#1b9e77", "#e7298a", \
        "#bdbdbd", "#1f78b4"

    plt.rcParams.update({"font.size": 10.5})
    fig = plt.figure(figsize=(12.0, 8.2))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.6, 1], height_ratios=[1.1, 1], left=0.07, right=0.985,
                            top=0.88, bottom=0.08, wspace=0.27, hspace=0.4)
    fig.suptitle("Stage 08: drop a tile before recomputing it, then add back its mass", fontsize=13.5,
                 weight="bold", y=0.985)
    fig.text(0.5, 0.932, f"one made-up token block: N = {N} rows, D = {D}, V = {V} in sorted order, tiles of "
             f"{TILE}; eps = 2^-8; float64", ha="center", fontsize=10.5, color="#444444")

    # (a) one row's logits, tile maxima and the drop line
    ax = fig.add_subplot(grid[0, :])
    for t in range(TILES):
        if dropped[t]:
            ax.axvspan(t * TILE - 0.5, (t + 1) * TILE - 0.5, color=drop_color, alpha=0.35, lw=0)
        ax.axvline(t * TILE - 0.5, color="#dddddd", lw=0.8)
    ax.plot(cols, z, "o", color=z_color, ms=3.5, label="logit $z_{ij}$ (sorted vocabulary)")
    for t in range(TILES):
        ax.plot([t * TILE - 0.5, (t + 1) * TILE - 0.5], [m[t], m[t]], color=m_color, lw=2.2,
                label="tile max $m_{iT}$" if t == 0 else None)
    ax.axhline(lse, color=lse_color, lw=1.5, label="$LSE_i$")
    ax.axhline(lse + math.log(EPS), color=eps_color, lw=1.5, ls="--", label="$LSE_i$ + ln eps")
    ax.plot([targets[i]], [z[targets[i]]], "*", color=lse_color, ms=14, label="the target")
    first_drop = int(np.argmax(dropped))
    ax.text(first_drop * TILE + 1.5, lse - 0.6,
            "shaded: tiles where every row of the block has its max below its $LSE_i$ + ln eps:\n"
            "dropped, never recomputed", fontsize=9.5, color="#444444", va="top")
    ax.set_xlim(-1, V)
    ax.set_xlabel("vocabulary entry in sorted order (tiles of %d)" % TILE)
    ax.set_ylabel("z")
    ax.legend(loc="lower left", fontsize=9.5, ncol=5, framealpha=0.92)
    ax.set_title(f"(a) row {i}: the forward leaves each tile's max; the decision reads it before any recompute", fontsize=11,
                 loc="left")

    # (b) the row's mass per tile
    bx = fig.add_subplot(grid[1, 0])
    mass = r["mass"][i]
    bx.bar(np.arange(TILES), mass, color=[drop_color if d else kept_color for d in dropped], edgecolor="#666666",
           width=0.7)
    bx.set_yscale("log")
    lost = float(mass[dropped].sum())
    bx.text(0.98, 0.95, f"dropped tiles' mass, row {i}: {lost:.3g}\n"
            f"(stage 07 loses it; stage 08 adds\nM_iT·C̄_T to dE, G_T/|T| to dC)",
            transform=bx.transAxes, ha="right", va="top", fontsize=9.5,
            bbox=dict(boxstyle="round", fc="white", ec="#999999"))
    bx.set_xticks(np.arange(TILES))
    bx.set_xlabel("tile T (grey: dropped for the block)")
    bx.set_ylabel("$M_{iT}$ = $s_{iT}\\,e^{m_{iT} - LSE_i}$ (log)")
    bx.set_title(f"(b) row {i}: each tile's softmax mass, from the statistics", fontsize=11, loc="left")

    # (c) the block's gradient error
    cx = fig.add_subplot(grid[1, 1])
    errs = [(rel(r["de_drop"], r["de"]), rel(r["de_fix"], r["de"])), (rel(r["dc_drop"], r["dc"]),
                                                                      rel(r["dc_fix"], r["dc"]))]
    x = np.arange(2)
    cx.bar(x - 0.18, [a for a, _ in errs], width=0.34, color="#fc8d62", label="dropped alone (stage 07's loss)")
    cx.bar(x + 0.18, [b for _, b in errs], width=0.34, color=kept_color, label="dropped, then corrected")
    for k, (a, b) in enumerate(errs):
        cx.text(k - 0.18, a * 1.15, f"{a:.2g}", ha="center", va="bottom", fontsize=9)
        cx.text(k + 0.18, b * 1.15, f"{b:.2g}", ha="center", va="bottom", fontsize=9)
    cx.set_yscale("log")
    cx.set_ylim(min(b for _, b in errs) / 5, max(a for a, _ in errs) * 8)
    cx.set_xticks(x, ["dE", "dC"])
    cx.set_ylabel("relative L2 error of the block")
    cx.legend(loc="upper right", fontsize=9, framealpha=0.92)
    cx.set_title("(c) what the correction buys", fontsize=11, loc="left")

    figure_cli.save_png(plt, fig, out, colors="rgb")


def main(argv):
    parser = Parser(description="Stage 08's decision and tail correction on a made-up block, drawn and checked.")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    figure_cli.add_seed_flag(parser, 4, "the made-up block's seed")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    e, c, targets = make_block(args.seed)
    draw(out, e, c, targets)
    r = gradients(e, c, targets)
    print(f"{out}: {int(r['dropped'].sum())} of {TILES} tiles dropped; dE error {rel(r['de_drop'], r['de']):.3e} "
          f"dropped, {rel(r['de_fix'], r['de']):.3e} corrected; dC {rel(r['dc_drop'], r['dc']):.3e}, "
          f"{rel(r['dc_fix'], r['dc']):.3e}")
    return figure_cli.verdict(PROG, claims(e, c, targets))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
