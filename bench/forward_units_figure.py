#!/usr/bin/env python3
"""How stage 03's fused forward cuts the logits into units, drawn at a made-up small shape.

    python3 bench/forward_units_figure.py [--out docs/figures/forward_units.png]
        [--n 512] [--d 2304] [--v 2500] [--ranges 3] [--sms 5]

No GPU and no data: the figure is a schematic of the plan of the Hopper
pipeline (tiles of 128 tokens × 256 vocabulary entries) for the sizes given.
It mirrors the repository's code:
  - the cut: plan_tile_units (common/tile/tile_path.cpp) on the pipeline path,
    with policy.ranges = --ranges (stage 03's --vocab-splits; 0: the pipeline's
    own choice, the range length whose busiest block gets the fewest tiles, at
    most 64 ranges as plan_fused asks), the token group from D as there, and
    grid = min(units, SMs);
  - the unit numbering: TileUnits::at (common/tile/units.cuh);
  - the walk: block b takes units u = b, b + grid, b + 2·grid, ... (the
    single-block walk of wgmma_pipeline.cuh's UnitWalk; clusters of two walk
    pairs of neighbouring token blocks instead, TileUnits::pair_at);
  - the epilogue's end(): unit (token block b, range r) writes the (max, sum)
    of each of its rows i to partial[r·N + i] (split_lse.cuh);
  - merge_ranges_kernel (fused_gemm_ce.cu): thread i merges partial[r·N + i]
    for r = 0, ..., S − 1 in order into LSE_i = m + log s.
Panel (a) is the logits E·Cᵀ [N × V] as token blocks × vocabulary tiles, each
unit outlined and coloured by the persistent block that takes it; panel (b)
is partial [S·N] laid out as S columns of N pairs beside the rows they belong
to, and the merge of one row into LSE.

The script asserts what the figure shows: every tile belongs to exactly one
unit, the ranges cover the vocabulary tiles in order without gaps and none is
empty, every unit is taken by exactly one block and each block's units follow
the stride rule, every slot of partial is written by exactly one unit, and
merging a row's pairs in range order gives its LSE (made-up logits, float64).
Exit 1 (DOES NOT HOLD) when one fails; 2 on a bad flag. Needs numpy and
matplotlib.
"""

import sys

import figure_cli

BM, BN = 128, 256      # the pipeline's tile: 128 tokens × 256 vocabulary entries
MAX_RANGES = 64        # plan_fused's policy.max_ranges
GROUP_BYTES = 20 << 20  # plan_tile_units: a token group keeps about 20 MB of E tiles
ELEMENT_BYTES = 2      # bf16


PROG = "forward_units_figure.py"
Parser = figure_cli.parser_class(PROG)


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


def plan_tile_units(n, d, v, ranges_asked, sms):
    """common/tile/tile_path.cpp's plan_tile_units on the pipeline path, policy.ranges = ranges_asked."""
    token_blocks = (n + BM - 1) // BM
    vocab_tiles = (v + BN - 1) // BN
    ranges = ranges_asked
    if ranges <= 0:
        best_cost = None
        for per_range in range(vocab_tiles, 0, -1):
            r = (vocab_tiles + per_range - 1) // per_range
            if r > MAX_RANGES:
                break
            cost = ((token_blocks * r + sms - 1) // sms) * per_range
            if best_cost is None or cost < best_cost:
                best_cost, ranges = cost, r
    ranges = min(max(ranges, 1), max(vocab_tiles, 1))
    tiles_per_range = (vocab_tiles + ranges - 1) // ranges
    ranges = (vocab_tiles + tiles_per_range - 1) // tiles_per_range  # no empty range
    group = max(1, GROUP_BYTES // max(BM * d * ELEMENT_BYTES, 1))
    groups = (token_blocks + group - 1) // group
    group = (token_blocks + groups - 1) // groups  # groups of equal size
    group = min(max(group, 1), max(token_blocks, 1))
    count = token_blocks * ranges
    return {"token_blocks": token_blocks, "vocab_tiles": vocab_tiles, "tiles_per_range": tiles_per_range,
            "ranges": ranges, "token_group": group, "count": count, "grid": min(count, sms)}


def unit_at(plan, u):
    """common/tile/units.cuh's TileUnits::at: (token block, range, tile_begin, tile_end) of unit u."""
    tb, group, ranges = plan["token_blocks"], plan["token_group"], plan["ranges"]
    groups = (tb + group - 1) // group
    per_group = group * ranges
    g = min(u // per_group, groups - 1)
    first = g * group
    size = min(tb - first, group)
    in_group = u - g * per_group
    block, r = first + in_group % size, in_group // size
    begin = r * plan["tiles_per_range"]
    return block, r, begin, min(begin + plan["tiles_per_range"], plan["vocab_tiles"])


def walks(plan):
    """The units each persistent block takes, in order: u = b, b + grid, ..."""
    return [list(range(b, plan["count"], plan["grid"])) for b in range(plan["grid"])]


def check(plan, units, walk, n, v):
    """What the figure claims, as (holds, what) pairs."""
    import numpy as np
    tb, tiles, ranges = plan["token_blocks"], plan["vocab_tiles"], plan["ranges"]
    owners = np.zeros((tb, tiles), dtype=int)
    for block, _, begin, end in units:
        owners[block, begin:end] += 1
    cover = sorted({(r, begin, end) for _, r, begin, end in units})
    contiguous = [c[0] for c in cover] == list(range(ranges)) and cover[0][1] == 0 and cover[-1][2] == tiles and \
        all(a[2] == b[1] for a, b in zip(cover, cover[1:])) and all(e > b for _, b, e in cover)
    taken = sorted(u for us in walk for u in us)
    stride = all(us == list(range(b, plan["count"], plan["grid"])) for b, us in enumerate(walk))
    writes = np.zeros(ranges * n, dtype=int)
    for block, r, _, _ in units:
        rows = np.arange(block * BM, min((block + 1) * BM, n))
        writes[r * n + rows] += 1

    rng = np.random.default_rng(3)
    z = rng.standard_normal((n, v)) * 4.0
    partial = np.empty((ranges * n, 2))
    for block, r, begin, end in units:
        rows = slice(block * BM, min((block + 1) * BM, n))
        part = z[rows, begin * BN:min(end * BN, v)]  # columns past V are −inf: left out
        m = part.max(axis=1)
        partial[r * n + np.arange(n)[rows]] = np.stack([m, np.exp(part - m[:, None]).sum(axis=1)], axis=1)
    m, s = np.full(n, -np.inf), np.zeros(n)
    for r in range(ranges):  # merge_ranges_kernel, one row per thread
        mr, sr = partial[r * n:(r + 1) * n].T
        top = np.maximum(m, mr)
        s = s * np.exp(m - top) + sr * np.exp(mr - top)
        m = top
    top = z.max(axis=1)
    direct = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
    return [
        ((owners == 1).all(), "every tile belongs to exactly one unit"),
        (contiguous, "the ranges cover the vocabulary tiles in order, without gaps, none empty"),
        (taken == list(range(plan["count"])), "every unit is taken by exactly one block"),
        (stride, "each block's units are u = b, b + grid, b + 2·grid, ..."),
        ((writes == 1).all(), "every slot of partial[S·N] is written by exactly one unit"),
        (np.allclose(m + np.log(s), direct, rtol=1e-12, atol=1e-12), "merging a row's ranges gives its LSE"),
    ]


def times_n(k):
    return "0" if k == 0 else "N" if k == 1 else f"{k}N"


def ordinal(k):
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(k, f"{k}th")


def draw(plan, units, walk, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    n, v = args.n, args.v
    tb, tiles, ranges, grid = plan["token_blocks"], plan["vocab_tiles"], plan["ranges"], plan["grid"]
    colours = plt.get_cmap("tab10").colors
    block_of, step_of = {}, {}
    for b, us in enumerate(walk):
        for k, u in enumerate(us):
            block_of[u], step_of[u] = b, k + 1

    # Data coordinates: one vocabulary tile is 1 wide, one token block 1 high; y grows downwards.
    pw = 1.55                     # one column of partial
    px0 = tiles + 1.4             # panel (b)
    lx = px0 + ranges * pw + 1.0  # the LSE column, 0.8 wide
    right, top, bottom = lx + 2.0, -2.45, tb + 2.4
    left = -right / 9  # the token blocks' labels: a tenth of the width
    fig = plt.figure(figsize=(10, 0.66 * (bottom - top)))
    ax = fig.add_axes([0.0, 0.0, 1.0, 1.0])
    ax.set_xlim(left, right)
    ax.set_ylim(bottom, top)
    ax.axis("off")
    ax.text((left + right) / 2, top + 0.1, f"Stage 03's plan at a made-up shape: N = {n}, V = {v}, D = {args.d}, "
            f"tiles of {BM} × {BN}, S = {ranges}, a GPU of {args.sms} SMs", ha="center", va="top", fontsize=11.5,
            weight="bold")

    row = min(n - 1, (tb // 2) * BM + (3 * BM) // 4)  # the row whose merge is drawn
    y = row / BM

    # (a) the logits: tiles, the columns past V, the units.
    for i in range(tb):
        for t in range(tiles):
            ax.add_patch(Rectangle((t, i), 1, 1, fill=False, lw=0.5, ec="0.55", zorder=1))
    past = tiles - v / BN
    if past > 0:
        ax.add_patch(Rectangle((v / BN, 0), past, tb, facecolor="0.8", hatch="////", ec="0.4", lw=0.5, zorder=2))
    for u, (i, r, begin, end) in enumerate(units):
        b = block_of[u]
        ax.add_patch(Rectangle((begin, i), end - begin, 1, facecolor=colours[b % 10], alpha=0.4, lw=0, zorder=0))
        ax.add_patch(Rectangle((begin + 0.05, i + 0.07), end - begin - 0.1, 0.86, fill=False, lw=2.0,
                               ec="black", zorder=3))
        ax.text((begin + end) / 2, i + (0.4 if i == row // BM else 0.5),
                f"unit {u}\nblock {b}, {ordinal(step_of[u])}", ha="center", va="center",
                fontsize=9.5 if end - begin > 2 else 8.5, zorder=4)
    for t in range(tiles):
        ax.text(t + 0.5, -0.08, str(t), ha="center", va="bottom", fontsize=8.5, color="0.35")
    for r in range(ranges):
        begin = r * plan["tiles_per_range"]
        end = min(begin + plan["tiles_per_range"], tiles)
        ax.annotate("", xy=(begin + 0.06, -0.62), xytext=(end - 0.06, -0.62),
                    arrowprops={"arrowstyle": "|-|", "lw": 1.0, "shrinkA": 0, "shrinkB": 0})
        ax.text((begin + end) / 2, -0.72, f"range {r}", ha="center", va="bottom", fontsize=9.5)
    for i in range(tb):
        ax.text(-0.1, i + 0.5, f"token block {i}\nrows {i * BM}–{min((i + 1) * BM, n) - 1}",
                ha="right", va="center", fontsize=9)
    ax.text(tiles / 2, -1.3, f"(a) the logits E·Cᵀ [N × V], never stored: {tb} token blocks × {tiles} "
            f"vocabulary tiles,\ncut into {len(units)} units (a token block × a range), each taken by one block",
            ha="center", va="bottom", fontsize=10)
    ax.text(tiles / 2, tb + 0.12, f"vocabulary tiles of {BN} entries, numbered above; hatched: columns past "
            f"V = {v}, folded as −∞", ha="center", va="top", fontsize=8.5, color="0.3")

    # Each unit's end() writes its rows' pairs into partial: same rows, column r.
    ax.text(tiles + 0.75, -0.08, "end()", ha="center", va="bottom", fontsize=9)
    for i in range(tb):
        ax.add_patch(FancyArrowPatch((tiles + 0.15, i + 0.5), (px0 - 0.1, i + 0.5), arrowstyle="-|>",
                                     mutation_scale=11, color="0.3", lw=1.0))

    # (b) partial [S·N]: column r holds partial[r·N + i] for i = 0 .. N − 1.
    for u, (i, r, _, _) in enumerate(units):
        x = px0 + r * pw
        ax.add_patch(Rectangle((x, i), pw, 1, facecolor=colours[block_of[u] % 10], alpha=0.4, ec="black", lw=1.0))
        text_y = i + 0.32 if i == row // BM else i + 0.5
        ax.text(x + pw / 2, text_y, f"unit {u}:\n{min(BM, n - i * BM)} pairs", ha="center", va="center",
                fontsize=8.5)
    for r in range(ranges):
        ax.text(px0 + (r + 0.5) * pw, -0.08, f"range {r}\n[{times_n(r)}, {times_n(r + 1)})", ha="center",
                va="bottom", fontsize=9)
    for i in range(tb):
        ax.add_patch(Rectangle((lx, i), 0.8, 1, facecolor="white", ec="black", lw=1.0))
    ax.text(lx + 0.4, -0.08, "LSE\n[N]", ha="center", va="bottom", fontsize=9)
    ax.text((px0 + lx + 0.8) / 2, -1.3, "(b) partial [S·N]: the unit of range r writes row i's\n"
            "(m, s) = (max, sum) to partial[r·N + i]", ha="center", va="bottom", fontsize=10)

    # The merge of one row i: its S pairs, in range order, into LSE_i; its logits cross one unit per range.
    ax.plot([0, tiles], [y, y], color="crimson", lw=1.0, ls=(0, (4, 3)), zorder=5)
    ax.text(0.2, y - 0.03, f"row {row}", ha="left", va="bottom", fontsize=8.5, color="crimson", zorder=5)
    for r in range(ranges):
        ax.plot([px0 + (r + 0.5) * pw], [y], "o", ms=5.5, color="crimson", zorder=6)
    ax.plot([px0 + 0.5 * pw, px0 + (ranges - 0.5) * pw], [y, y], color="crimson", lw=1.3, zorder=5)
    ax.add_patch(FancyArrowPatch((px0 + (ranges - 0.5) * pw, y), (lx, y), arrowstyle="-|>", mutation_scale=13,
                                 color="crimson", lw=1.3, zorder=6, shrinkA=0, shrinkB=0))
    ax.plot([lx, lx + 0.8], [y, y], color="crimson", lw=2.5, zorder=6)
    ax.text(lx + 0.9, y, f"LSE$_{{{row}}}$", ha="left", va="center", fontsize=9, color="crimson")
    ax.text((px0 + lx + 0.8) / 2, tb + 0.12,
            f"merge_ranges_kernel, thread i = {row}: for r = 0 .. {ranges - 1},\n"
            f"$(m_r, s_r)$ = partial[r·N + {row}],\n"
            r"$m' = \max(m, m_r)$,  $s \leftarrow s\,e^{m - m'} + s_r\,e^{m_r - m'}$,  $m \leftarrow m'$;"
            f"\nthen LSE$_{{{row}}}$ = m + log s",
            ha="center", va="top", fontsize=9, color="crimson")

    # The walk, block by block.
    handles = [Rectangle((0, 0), 1, 1, facecolor=colours[b % 10], alpha=0.4, ec="black") for b in range(grid)]
    labels = [f"block {b}: units " + ", ".join(str(u) for u in us) for b, us in enumerate(walk)]
    ax.legend(handles, labels, loc="lower center", bbox_to_anchor=((tiles / 2 - left) / (right - left), 0.0),
              ncol=min(grid, 3), fontsize=9, frameon=False, handlelength=1.5, columnspacing=1.5,
              title=f"{grid} persistent blocks, gridDim.x = min(units, SMs) = {grid}:\nblock b = blockIdx.x "
                    f"takes units u = b, b + {grid}, b + {2 * grid}, ...",
              title_fontsize=9.5)
    ax.text((px0 + lx + 0.8) / 2, bottom - 0.08, "The walk of single blocks is drawn; clusters of two take pairs\n"
            "of neighbouring token blocks instead (TileUnits::pair_at).", ha="center", va="bottom", fontsize=8,
            color="0.4")
    figure_cli.save_png(plt, fig, args.out)


def main(argv):
    parser = Parser(description="Stage 03's units, their blocks and the merge of ranges, drawn (no GPU).")
    parser.add_argument("--out", default="docs/figures/forward_units.png", help="the PNG to write")
    parser.add_argument("--n", type=int, default=512, help="tokens N (default 512: 4 token blocks)")
    parser.add_argument("--d", type=int, default=2304, help="hidden size D; sets the token group (default 2304)")
    parser.add_argument("--v", type=int, default=2500, help="vocabulary V (default 2500: 10 tiles of 256)")
    parser.add_argument("--ranges", type=int, default=3,
                        help="ranges asked, as --vocab-splits (default 3; 0: the pipeline's own choice)")
    parser.add_argument("--sms", type=int, default=5, help="multiprocessors of the made-up GPU (default 5)")
    args = parser.parse_args(argv)
    if not 1 <= args.n <= 8 * BM:
        fail(f"--n {args.n}: expected 1..{8 * BM} (at most 8 token blocks, for a readable schematic)")
    if not 1 <= args.v <= 12 * BN:
        fail(f"--v {args.v}: expected 1..{12 * BN} (at most 12 vocabulary tiles)")
    if args.d < 1:
        fail(f"--d {args.d}: expected a positive size")
    if args.ranges < 0:
        fail(f"--ranges {args.ranges}: expected 0 or more")
    if not 1 <= args.sms <= 9:
        fail(f"--sms {args.sms}: expected 1..9 (one colour per persistent block)")
    figure_cli.require_plotting(PROG)

    plan = plan_tile_units(args.n, args.d, args.v, args.ranges, args.sms)
    units = [unit_at(plan, u) for u in range(plan["count"])]
    walk = walks(plan)
    draw(plan, units, walk, args)
    print(f"{args.out}: {plan['token_blocks']} token blocks x {plan['ranges']} ranges of "
          f"{plan['tiles_per_range']} tiles ({plan['vocab_tiles']} tiles), token group {plan['token_group']}, "
          f"{plan['count']} units on {plan['grid']} blocks")

    return figure_cli.verdict(PROG, check(plan, units, walk, args.n, args.v))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
