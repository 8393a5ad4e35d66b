#!/usr/bin/env python3
"""Stage 07's gradient filter and vocabulary sort, on a small made-up batch.

    /usr/bin/python3 bench/filter_sort_figure.py [--out docs/figures/filter_sort.png] [--seed 7]

No GPU, no data. A made-up model gives 64 tokens (8 token blocks of 8) and
128 vocabulary entries (16 tiles of 8); the code's tiles are 128 × 128.
z = softcap(E·Cᵀ) with D = 16. One column of C gives the entry of
popularity rank r the bias 9 − 3·ln r for every token, so a few entries are
popular, and they sit at random places in the vocabulary; the other
columns add noise of standard deviation 1. The targets are drawn from each
row's own softmax; three tokens are ignored. The softcap is 30, Gemma-2's.

The rules are the code's, in float64:
  - the filter: filtered_backward_kernel (stages/07_filter_sort/filter_sort.cu)
    through store_tile_gradient (stages/06_fused_backward/backward_tile.cuh).
    For each row with g_i ≠ 0 and each position < V,
    u_ij = (exp(z_ij − LSE_i) − [vocab_j = t_i])·softcap′(z_ij), the unscaled
    gradient (S_ij = g_i·u_ij). A tile is kept when some |u_ij| ≥ eps
    (keep |= fabsf(unscaled) >= eps, then __syncthreads_or), else skipped.
    eps = default_filter_eps(bf16) = 2⁻¹².
  - the sort key: SortKeyEpilogue (filter_sort.cu) with sum_tile_columns
    (common/tile/column_sums.cuh): key_j = Σ_i z_ij over every row i < N,
    ignored ones too, of the softcapped logits. sort_vocabulary orders the
    vocabulary by cub's SortPairsDescending over (key_j, j): descending, and
    stable, so equal keys keep index order. Tile position p holds entry order[p].
  - the bound (stages/07_filter_sort/README.md, "The error bound"): dropping
    a skipped tile's terms changes dE_ik by at most g_i·eps·Σ_j |C_jk| and
    dC_jk by at most eps·Σ_i g_i·|E_ik|. docs/tolerances.md's allowance,
    g_i·Σ_{j: |u_ij| < eps} |u_ij|·|C_jk| (and the same over i for dC), is
    never looser.

The figure shows each tile's largest |u| as a heat map (skipped tiles grey,
kept tiles warm), in the natural order (left) and sorted by the key (right),
with each entry's key below its tile column.

The script asserts, in float64 (exit 1, DOES NOT HOLD, when one fails):
  - the order is a permutation with non-increasing keys;
  - sorting keeps strictly fewer tiles than the natural order;
  - every voting entry of a skipped tile has |u_ij| < eps, so |S_ij| < g_i·eps;
  - ignored rows (g_i = 0) decide no tile;
  - for both orders, the gradients from the kept tiles only differ from the
    full dE = S·C and dC = Sᵀ·E by no more than the allowance, and the
    allowance is within the README's bound (slack 1e-12 of the terms' sum);
  - a term below eps = 2⁻¹² is under half a bf16 unit in the last place of
    any value ≥ 2⁻⁴ (the README's reason for eps).
Exit 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "filter_sort.png"

# The made-up batch: tiles of TILE × TILE (the code's are 128 × 128).
TILE = 8
TOKEN_BLOCKS, VOCAB_TILES = 8, 16
N, V, D = TOKEN_BLOCKS * TILE, VOCAB_TILES * TILE, 16
SOFTCAP = 30.0                 # Gemma-2's
IGNORED = (13, 30, 51)         # tokens with ignore_index: g_i = 0
IGNORE_INDEX = -100
ZIPF_TOP, ZIPF_SLOPE = 9.0, 3.0  # the bias of the entry of popularity rank r: ZIPF_TOP − ZIPF_SLOPE·ln r
NOISE = 1.0                     # the standard deviation of a logit's token-dependent part

EPS = 2.0 ** -12                # default_filter_eps(Dtype::kBFloat16)
SLACK = 1e-12                   # float64 rounding, relative to the sum of the terms

PROG = "filter_sort_figure.py"
Parser = figure_cli.parser_class(PROG)


def make_batch(seed):
    """E [N, D], C [V, D], targets [N]: a bias column makes a few entries popular for every token."""
    import numpy as np
    rng = np.random.default_rng(seed)
    rank = rng.permutation(V) + 1                    # popularity rank of each entry, at random places
    bias = ZIPF_TOP - ZIPF_SLOPE * np.log(rank)
    scale = NOISE / math.sqrt(D - 1)
    e = np.concatenate([np.ones((N, 1)), rng.normal(0.0, math.sqrt(scale), (N, D - 1))], axis=1)
    c = np.concatenate([bias[:, None], rng.normal(0.0, math.sqrt(scale), (V, D - 1))], axis=1)
    z = softcapped(e @ c.T)
    p = np.exp(z - lse(z)[:, None])
    targets = np.array([rng.choice(V, p=row / row.sum()) for row in p])
    targets[list(IGNORED)] = IGNORE_INDEX
    return e, c, targets


def softcapped(x):
    """apply_softcap: s·tanh(x/s), or x without a softcap."""
    import numpy as np
    return SOFTCAP * np.tanh(x / SOFTCAP) if SOFTCAP > 0 else x


def softcap_derivative(z):
    """softcap_derivative, through z: 1 − (z/s)²."""
    return 1.0 - (z / SOFTCAP) ** 2 if SOFTCAP > 0 else 1.0 + 0.0 * z


def lse(z):
    import numpy as np
    top = z.max(axis=1)
    return top + np.log(np.exp(z - top[:, None]).sum(axis=1))


def grad_scale(targets):
    """g_i of `mean`: 1/#valid, 0 for ignored tokens."""
    import numpy as np
    valid = targets != IGNORE_INDEX
    return np.where(valid, 1.0 / valid.sum(), 0.0)


def unscaled_gradient(z, targets):
    """u_ij = (p_ij − [j = t_i])·softcap′(z_ij), by vocabulary entry j (store_tile_gradient's `unscaled`)."""
    import numpy as np
    p = np.exp(z - lse(z)[:, None])
    onehot = np.arange(z.shape[1])[None, :] == targets[:, None]
    return (p - onehot) * softcap_derivative(z)


def sort_key(z):
    """SortKeyEpilogue's column_sums: Σ_i z_ij over every row < N (ignored rows included)."""
    return z.sum(axis=0)


def vocabulary_order(key):
    """SortPairsDescending over (key_j, j): descending, ties in index order."""
    import numpy as np
    return np.argsort(-key, kind="stable")


def keep_tile(u_tile, eps):
    """The block's vote: keep = eps <= 0; keep |= |u| >= eps over the voting entries."""
    import numpy as np
    return bool(eps <= 0.0 or np.any(np.abs(u_tile) >= eps))


def tile_decisions(u, g, order, eps):
    """kept [token blocks, tiles] for the vocabulary visited in `order` (tile position p holds order[p])."""
    import numpy as np
    voting = u[:, order] * (g != 0)[:, None]   # rows with g_i = 0 do not vote (their u is never visited)
    kept = np.zeros((TOKEN_BLOCKS, VOCAB_TILES), dtype=bool)
    for b in range(TOKEN_BLOCKS):
        for t in range(VOCAB_TILES):
            kept[b, t] = keep_tile(voting[b * TILE:(b + 1) * TILE, t * TILE:(t + 1) * TILE], eps)
    return kept


def tile_maxima(u, g, order):
    """Each tile's largest |u| over its voting entries, in `order`."""
    import numpy as np
    a = np.abs(u[:, order]) * (g != 0)[:, None]
    return a.reshape(TOKEN_BLOCKS, TILE, VOCAB_TILES, TILE).max(axis=(1, 3))


def kept_entries(kept, order):
    """[N, V] by vocabulary entry: True where the entry's tile ran its products."""
    import numpy as np
    by_position = np.repeat(np.repeat(kept, TILE, axis=0), TILE, axis=1)
    mask = np.empty_like(by_position)
    mask[:, order] = by_position
    return mask


def analyse(e, c, targets):
    """Everything the figure draws and the claims check."""
    import numpy as np
    z = softcapped(e @ c.T)
    g = grad_scale(targets)
    u = unscaled_gradient(z, targets)
    key = sort_key(z)
    orders = {"natural": np.arange(V), "sorted": vocabulary_order(key)}
    out = {"z": z, "g": g, "u": u, "key": key, "orders": orders, "kept": {}, "maxima": {}, "masks": {}}
    for name, order in orders.items():
        out["kept"][name] = tile_decisions(u, g, order, EPS)
        out["maxima"][name] = tile_maxima(u, g, order)
        out["masks"][name] = kept_entries(out["kept"][name], order)
    return out


def half_ulp_bf16(x):
    """Half a unit in the last place of a bf16 value x > 0 (8 significant bits)."""
    return 2.0 ** (math.floor(math.log2(x)) - 7) / 2.0


def bound_claims(e, c, g, u, mask, name):
    """The kept tiles' dE and dC against the full ones, within tolerances.md's allowance and the README's bound."""
    import numpy as np
    s = g[:, None] * u
    de_full, dc_full = s @ c, s.T @ e
    de_kept, dc_kept = (s * mask) @ c, (s * mask).T @ e
    small = np.abs(u) < EPS
    a_u = np.abs(u) * small
    allow_de = g[:, None] * (a_u @ np.abs(c))
    allow_dc = (g[:, None] * a_u).T @ np.abs(e)
    bound_de = g[:, None] * EPS * np.abs(c).sum(axis=0)[None, :]
    bound_dc = EPS * (g[:, None] * np.abs(e)).sum(axis=0)[None, :].repeat(V, axis=0)
    slack_de = SLACK * (np.abs(s) @ np.abs(c))
    slack_dc = SLACK * (np.abs(s).T @ np.abs(e))
    moved_de, moved_dc = np.abs(de_full - de_kept), np.abs(dc_full - dc_kept)
    return [
        (bool(np.all(moved_de <= allow_de + slack_de) and np.all(moved_dc <= allow_dc + slack_dc)),
         f"{name} order: the kept tiles' dE and dC are within docs/tolerances.md's allowance of the full ones "
         "(g_i Σ_{j: |u_ij| < eps} |u_ij||C_jk|, and over i for dC)"),
        (bool(np.all(allow_de <= bound_de + slack_de) and np.all(allow_dc <= bound_dc + slack_dc)
              and np.all(moved_de <= bound_de + slack_de) and np.all(moved_dc <= bound_dc + slack_dc)),
         f"{name} order: the change is within the README's bound g_i·eps·Σ_j |C_jk| (dE), eps·Σ_i g_i|E_ik| (dC)"),
    ]


def bound_use(e, c, g, u, mask):
    """The largest |change| / bound over dE's and dC's elements (for the report)."""
    import numpy as np
    s = g[:, None] * u
    dropped = s * ~mask
    bound_de = g[:, None] * EPS * np.abs(c).sum(axis=0)[None, :]
    bound_dc = EPS * (g[:, None] * np.abs(e)).sum(axis=0)[None, :]
    valid = g != 0
    use_de = (np.abs(dropped @ c)[valid] / bound_de[valid]).max()
    use_dc = (np.abs(dropped.T @ e) / bound_dc).max()
    return use_de, use_dc


def claims(e, c, targets):
    """(holds, what) for each thing the figure shows."""
    import numpy as np
    a = analyse(e, c, targets)
    g, u, key = a["g"], a["u"], a["key"]
    order = a["orders"]["sorted"]
    natural, sorted_ = int(a["kept"]["natural"].sum()), int(a["kept"]["sorted"].sum())
    voting = (g != 0)[:, None]
    below = all(bool(np.all((np.abs(u) < EPS) | a["masks"][name] | ~voting)) for name in a["orders"])
    ignored_only = u.copy()
    ignored_only[g != 0] = 0.0
    no_vote = not tile_decisions(ignored_only, g, order, EPS).any()
    out = [
        (sorted(order.tolist()) == list(range(V)) and bool(np.all(np.diff(key[order]) <= 0)),
         "the order is a permutation of the vocabulary with non-increasing keys Σ_i z_ij"),
        (sorted_ < natural, f"sorting keeps strictly fewer tiles than the natural order ({sorted_} vs {natural})"),
        (below, "every voting entry of a skipped tile has |u_ij| < eps = 2^-12 (so |S_ij| < g_i·eps)"),
        (no_vote, "rows with g_i = 0 (ignored tokens) keep no tile"),
        (half_ulp_bf16(2.0 ** -4) == EPS and all(half_ulp_bf16(2.0 ** (x / 4)) >= EPS for x in range(-16, 64)),
         "a term below eps = 2^-12 is under half a bf16 unit in the last place of any value >= 2^-4"),
    ]
    for name in a["orders"]:
        out += bound_claims(e, c, g, u, a["masks"][name], name)
    return out


def draw(out, e, c, targets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap, TwoSlopeNorm
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, Rectangle

    a = analyse(e, c, targets)
    g, key = a["g"], a["key"]
    log_eps = math.log2(EPS)
    low, high = -28.0, 0.0
    cold = plt.get_cmap("Greys")(np.linspace(0.08, 0.42, 128))
    warm = plt.get_cmap("YlOrRd")(np.linspace(0.12, 0.95, 128))
    cmap = ListedColormap(np.vstack([cold, warm]))
    norm = TwoSlopeNorm(vmin=low, vcenter=log_eps, vmax=high)

    plt.rcParams.update({"font.size": 10.5})
    fig = plt.figure(figsize=(10.0, 6.5))
    grid = fig.add_gridspec(2, 3, width_ratios=[1, 1, 0.045], height_ratios=[1, 0.36], left=0.075, right=0.9,
                            top=0.76, bottom=0.165, wspace=0.1, hspace=0.1)
    fig.suptitle("Stage 07: skip a tile when every |u| < eps; sorting the vocabulary makes whole tiles skippable",
                 fontsize=13, weight="bold", y=0.975)
    fig.text(0.5, 0.895, f"{N} made-up tokens × {V} vocabulary entries, tiles of {TILE} × {TILE} (the code's: "
             "128 × 128); a few entries are popular for every token\n"
             "colour: each tile's largest $|u_{ij}|$, $u_{ij} = (p_{ij} - [j = t_i])\\cdot$softcap$'(z_{ij})$"
             f";  grey: all below eps = $2^{{{int(log_eps)}}}$, skipped", ha="center", va="center",
             fontsize=10.5, color="#333333", linespacing=1.5)

    titles = {"natural": "(a) natural vocabulary order", "sorted": "(b) sorted by key$_j$ = Σ$_i$ $z_{ij}$, descending"}
    axes = {}
    for col, name in enumerate(("natural", "sorted")):
        order = a["orders"][name]
        kept, maxima = a["kept"][name], a["maxima"][name]
        heat = fig.add_subplot(grid[0, col])
        with np.errstate(divide="ignore"):
            image = heat.imshow(np.clip(np.log2(maxima), low, high), cmap=cmap, norm=norm, aspect="auto",
                                interpolation="nearest", extent=(-0.5, VOCAB_TILES - 0.5, TOKEN_BLOCKS - 0.5, -0.5))
        for b in range(TOKEN_BLOCKS):
            for t in range(VOCAB_TILES):
                if not kept[b, t]:
                    heat.add_patch(Rectangle((t - 0.5, b - 0.5), 1, 1, fill=False, hatch="////", ec="#bdbdbd",
                                             lw=0))
        position = np.empty(V, dtype=int)
        position[order] = np.arange(V)
        for i in range(N):
            if g[i] != 0:
                heat.plot(position[targets[i]] // TILE, i // TILE, "o", color="#222222", mec="white", mew=0.6,
                          ms=4.5)
        heat.set_xticks(np.arange(VOCAB_TILES) - 0.5, minor=True)
        heat.set_yticks(np.arange(TOKEN_BLOCKS) - 0.5, minor=True)
        heat.grid(which="minor", color="white", lw=1.2)
        heat.tick_params(which="minor", length=0)
        heat.tick_params(labelbottom=False, bottom=False)
        heat.set_yticks(range(TOKEN_BLOCKS))
        if col == 0:
            heat.set_ylabel("token block")
        else:
            heat.set_yticklabels([])
        k = int(kept.sum())
        heat.set_title(f"{titles[name]}\nkept {k} of {kept.size} tiles ({100.0 * k / kept.size:.0f}%)",
                       fontsize=11, loc="left")

        strip = fig.add_subplot(grid[1, col], sharex=heat)
        x = (np.arange(V) + 0.5) / TILE - 0.5
        strip.bar(x, key[order], width=1.0 / TILE, color="#6a51a3", lw=0)
        for t in range(1, VOCAB_TILES):
            strip.axvline(t - 0.5, color="#dddddd", lw=0.8, zorder=0)
        strip.axhline(0, color="#888888", lw=0.6)
        strip.set_xlim(-0.5, VOCAB_TILES - 0.5)
        strip.set_xticks(range(0, VOCAB_TILES, 3))
        strip.set_xlabel("vocabulary tile (position in the order)")
        if col == 0:
            strip.set_ylabel("key$_j$")
        else:
            strip.set_yticklabels([])
        axes[name] = (heat, strip)
    ymin = min(ax[1].get_ylim()[0] for ax in axes.values())
    ymax = max(ax[1].get_ylim()[1] for ax in axes.values())
    for heat, strip in axes.values():
        strip.set_ylim(ymin, ymax)

    bar = fig.add_subplot(grid[0, 2])
    cb = fig.colorbar(image, cax=bar)
    ticks = [-28, -24, -20, -16, -12, -8, -4, 0]
    cb.set_ticks(ticks)
    cb.set_ticklabels([f"$2^{{{t}}}$" if t else "1" for t in ticks])
    cb.ax.axhline(log_eps, color="#222222", lw=2)
    cb.ax.text(-0.3, log_eps, "eps ", va="center", ha="right", fontsize=10, weight="bold",
               transform=cb.ax.get_yaxis_transform())
    cb.ax.text(0.5, 1.03, "largest |u|\nin the tile", va="bottom", ha="center", fontsize=9.5,
               transform=cb.ax.transAxes)

    use_de, use_dc = bound_use(e, c, g, a["u"], a["masks"]["sorted"])
    fig.legend(handles=[Patch(fc=cold[70], ec="#bdbdbd", hatch="////", label="skipped: no products, no atomics"),
                        Line2D([], [], ls="", marker="o", color="#222222", mec="white", mew=0.6, ms=6,
                               label="a row's target is in the tile (u = p − 1: kept)")],
               loc="lower left", bbox_to_anchor=(0.068, 0.045), ncol=2, fontsize=9.5, frameon=False,
               handlelength=1.6, columnspacing=2.5)
    fig.text(0.075, 0.025, f"Skipping changes $dE_{{ik}}$ by at most $g_i$·eps·Σ$_j$|$C_{{jk}}$| and $dC_{{jk}}$ by at most "
             f"eps·Σ$_i$ $g_i$|$E_{{ik}}$|; in (b), at most {use_de:.0%} and {use_dc:.0%} of that (float64).",
             fontsize=9.5, color="#333333", linespacing=1.6)

    figure_cli.save_png(plt, fig, out)


def main(argv):
    parser = Parser(description="Stage 07's filter and sort on a small made-up batch, drawn and checked (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    figure_cli.add_seed_flag(parser, 7, "the made-up batch's seed")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    e, c, targets = make_batch(args.seed)
    draw(out, e, c, targets)
    a = analyse(e, c, targets)
    natural, sorted_ = int(a["kept"]["natural"].sum()), int(a["kept"]["sorted"].sum())
    use_de, use_dc = bound_use(e, c, a["g"], a["u"], a["masks"]["sorted"])
    print(f"{out}: {N} tokens × {V} entries in {TOKEN_BLOCKS} × {VOCAB_TILES} tiles of {TILE} × {TILE}; "
          f"eps 2^{int(math.log2(EPS))}; kept {natural} of {TOKEN_BLOCKS * VOCAB_TILES} tiles in the natural "
          f"order, {sorted_} sorted; sorted, the largest change uses {use_de:.3f} (dE) and {use_dc:.3f} (dC) "
          "of the bound")
    return figure_cli.verdict(PROG, claims(e, c, targets))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
