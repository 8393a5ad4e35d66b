#!/usr/bin/env python3
"""Stage 04's indexed dot z_{i,t_i} = C_{t_i}·E_i on a made-up shape, drawn block by block.

    /usr/bin/python3 bench/indexed_dot_figure.py [--out docs/figures/indexed_dot.png]

No GPU, no data. It mirrors stages/04_indexed_dot/indexed_dot.cu (constants in
indexed_dot.h): indexed_dot_2d_kernel with kDotThreads = 256 threads per block
= kTokensPerBlock = 8 tokens, one warp each; D cut into kSliceD = 256-element
slices along gridDim.y = min(⌈D/256⌉, 65535) (plan_indexed_dot), a block
looping over slices y, y + gridDim.y, ...; lane l reading W elements at
begin + W·l, then 32·W further (lane_partial_dot, W from widest_load); one
atomicAdd per (token, block) into dot[i], zeroed first; a token with
t_i = ignore_index leaves before touching C; then finalize_token_loss_kernel:
loss_i = LSE_i − softcap(dot_i), 0 for an ignored token. The 1d variant
(indexed_dot_1d_kernel) is one warp over all of D, one plain store.

The figure (N = 16 tokens, D = 1000 → 4 slices, the last of 232, V = 40,
tokens 5 and 12 ignored) shows E's rows cut into the grid's 2 × 4 blocks, the
targets t_i pointing at scattered rows of C (the gather), and one token's four
slice partials converging by atomicAdd on dot[i], then finalize.

The script asserts, in float64 on random E and C (several seeds and D values,
D not a multiple of 256, some tokens ignored): the partials of a token's slices
sum to C_{t_i}·E_i (to 1e-12); every (token, slice) pair is read by exactly one
(block, warp); gridDim.y = min(⌈D/256⌉, 65535), and with the cap every slice
is still read once; ignored tokens get no partial, dot 0 and loss 0. Exit 1
(DOES NOT HOLD) when one fails; 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "indexed_dot.png"

DOT_THREADS = 256                     # kDotThreads
TOKENS_PER_BLOCK = DOT_THREADS // 32  # kTokensPerBlock: a warp per token
SLICE_D = 256                         # kSliceD
MAX_GRID_Y = 65535                    # kMaxGridY, CUDA's limit on gridDim.y
IGNORE = -100

N, D, V = 16, 1000, 40                # the figure's shape
TARGETS = [17, 3, 31, 8, 25, IGNORE, 36, 12, 21, 1, 29, 14, IGNORE, 38, 6, 29]  # two tokens share row 29
FOCUS = 10                            # the token whose partials are drawn

PROG = "indexed_dot_figure.py"
Parser = figure_cli.parser_class(PROG)


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


def plan_grid(n, d):
    """plan_indexed_dot, 2d: (token blocks, D slices) = (⌈N/8⌉, min(⌈D/256⌉, 65535))."""
    return (n + TOKENS_PER_BLOCK - 1) // TOKENS_PER_BLOCK, min((d + SLICE_D - 1) // SLICE_D, MAX_GRID_Y)


def widest_load(d, itemsize):
    """widest_load: 16 bytes at most, halved until the width divides D (buffers assumed aligned)."""
    width = 16 // itemsize
    while width > 1 and d % width != 0:
        width //= 2
    return width


def block_slices(y, grid_y, d):
    """The slice starts block (x, y) walks: begin = 256y, then + gridDim.y·256, while begin < D."""
    return list(range(y * SLICE_D, d, grid_y * SLICE_D))


def lane_partial_dot(c_row, e_row, begin, end, lane, width):
    """lane_partial_dot in float64: this lane's W elements at begin + W·l, then 32·W further on."""
    total = 0.0
    for k in range(begin + lane * width, end, 32 * width):
        total += float(c_row[k:k + width] @ e_row[k:k + width])
    return total


def indexed_dot_2d(e, c, targets, width=4):
    """The 2d kernel, block by block. Returns dot and the partials: (i, block x, block y, warp, begin, value)."""
    import numpy as np
    n, d = e.shape
    grid_x, grid_y = plan_grid(n, d)
    dot = np.zeros(n)  # the cudaMemsetAsync
    partials = []
    for x in range(grid_x):
        for y in range(grid_y):
            for w in range(TOKENS_PER_BLOCK):
                i = x * TOKENS_PER_BLOCK + w
                if i >= n:
                    continue  # the last block's spare warps
                t = targets[i]
                if t == IGNORE:
                    continue  # the whole warp leaves: C is never indexed with ignore_index
                for begin in block_slices(y, grid_y, d):
                    end = min(begin + SLICE_D, d)
                    value = sum(lane_partial_dot(c[t], e[i], begin, end, lane, width) for lane in range(32))
                    partials.append((i, x, y, w, begin, value))
                    dot[i] += value  # atomicAdd(dot + i, sum) by lane 0
    return dot, partials


def finalize(lse, dot, targets, softcap=0.0):
    """finalize_token_loss_kernel: LSE_i − softcap(dot_i), 0 for an ignored token."""
    capped = [softcap * math.tanh(z / softcap) if softcap > 0 else z for z in dot]
    return [0.0 if t == IGNORE else l - z for l, z, t in zip(lse, capped, targets)]


def make_inputs(seed, n, d, v, targets=None):
    import numpy as np
    rng = np.random.default_rng(seed)
    e = rng.normal(0.0, 0.18, (n, d))
    c = rng.normal(0.0, 0.18, (v, d))
    if targets is None:
        targets = [int(t) for t in rng.integers(0, v, n)]
        for i in rng.choice(n, max(1, n // 6), replace=False):
            targets[int(i)] = IGNORE
    return e, c, targets


def lse_rows(e, c):
    import numpy as np
    logits = e @ c.T
    m = logits.max(axis=1)
    return m + np.log(np.exp(logits - m[:, None]).sum(axis=1))


def claims():
    """(holds, what) pairs, in float64."""
    out = []
    cases = [(0, N, D, V, TARGETS), (1, 19, 1000, 40, None), (2, 13, 257, 30, None), (3, 9, 100, 20, None),
             (4, 17, 513, 25, None), (5, 8, 256, 10, None)]
    for seed, n, d, v, targets in cases:
        e, c, targets = make_inputs(seed, n, d, v, targets)
        dot, partials = indexed_dot_2d(e, c, targets, widest_load(d, 4))
        valid = [i for i in range(n) if targets[i] != IGNORE]
        exact = {i: float(c[targets[i]] @ e[i]) for i in valid}
        out.append((all(abs(dot[i] - exact[i]) <= 1e-12 * max(1.0, abs(exact[i])) for i in valid),
                    f"the slice partials of each token sum to C_t·E_i to 1e-12 (seed {seed}, N {n}, D {d})"))
        slices = (d + SLICE_D - 1) // SLICE_D
        seen = {}
        for i, x, y, w, begin, _ in partials:
            seen.setdefault((i, begin // SLICE_D), []).append((x, y, w))
        once = all(len(seen.get((i, s), [])) == 1 for i in valid for s in range(slices))
        only = all(i in valid for i, _ in seen) and all(s < slices for _, s in seen)
        out.append((once and only, f"every (token, slice) pair is read by exactly one (block, warp) (seed {seed}, D {d})"))
        out.append((plan_grid(n, d)[1] == slices, f"gridDim.y = ⌈D/256⌉ = {slices} (D {d})"))
        ignored = [i for i in range(n) if targets[i] == IGNORE]
        loss = finalize(lse_rows(e, c), dot, targets)
        out.append((all(i not in {p[0] for p in partials} and dot[i] == 0.0 and loss[i] == 0.0 for i in ignored),
                    f"ignored tokens get no partial, dot 0 and loss 0 (seed {seed})"))
    # The cap, as pure arithmetic on slice numbers: past 65535 slices a block walks y, y + 65535, ...
    for d in (256, 257, 256 * MAX_GRID_Y, 256 * MAX_GRID_Y + 1, 256 * (MAX_GRID_Y + 3) - 5):
        slices = (d + SLICE_D - 1) // SLICE_D
        grid_y = plan_grid(1, d)[1]
        count = [0] * slices
        for y in range(grid_y):
            for begin in block_slices(y, grid_y, d):
                count[begin // SLICE_D] += 1
        out.append((grid_y == min(slices, MAX_GRID_Y) and all(k == 1 for k in count),
                    f"gridDim.y = min(⌈D/256⌉, 65535) and every slice read once (D {d})"))
    out.append((widest_load(D, 2) == 8 and widest_load(D, 4) == 4 and widest_load(100, 2) == 4,
                "widest_load: D = 1000 gives W = 8 (bf16) and 4 (fp32); D = 100 bf16 gives 4"))
    return out


SLICE_COLORS = ["#4e79a7", "#59a14f", "#f28e2b", "#b07aa1"]


def draw(out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, Rectangle

    e, c, targets = make_inputs(0, N, D, V, TARGETS)
    dot, partials = indexed_dot_2d(e, c, targets, widest_load(D, 4))
    lse = lse_rows(e, c)
    loss = finalize(lse, dot, targets)
    grid_x, grid_y = plan_grid(N, D)

    fig = plt.figure(figsize=(10.0, 9.0))
    ax = fig.add_axes([0, 0, 1, 1])
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 90)
    ax.axis("off")
    fs = 9.5
    white = dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1.0)

    ax.text(50, 88.3, f"Stage 04: the indexed dot z[i] = C[t_i]·E[i], 2d variant at N = {N}, D = {D}, V = {V}",
            ha="center", va="center", fontsize=12.5, weight="bold")
    ax.text(50, 85.6, f"grid = (⌈N/8⌉, min(⌈D/256⌉, 65535)) = ({grid_x}, {grid_y}); "
            f"{DOT_THREADS} threads per block = {TOKENS_PER_BLOCK} warps = {TOKENS_PER_BLOCK} tokens, a warp each; "
            f"D in slices of {SLICE_D}", ha="center", va="center", fontsize=fs)

    # E: rows i, cut into the grid's blocks (x: 8 tokens, y: one D slice).
    ex0, ew = 10.5, 32.0
    bounds = [min(s * SLICE_D, D) for s in range(grid_y + 1)]
    xs = [ex0 + ew * b / D for b in bounds]
    rh, top = 2.05, 80.5

    def e_row_y(i):
        return top - (i + 1) * rh - (1.0 if i >= TOKENS_PER_BLOCK else 0.0)

    ax.text(ex0 + ew / 2, 83.0, "E  [N × D]: row i = token i; boxes = blocks (x, y)", ha="center", fontsize=10.5,
            weight="bold")
    for i in range(N):
        y0 = e_row_y(i)
        ignored = targets[i] == IGNORE
        for s in range(grid_y):
            ax.add_patch(Rectangle((xs[s], y0), xs[s + 1] - xs[s], rh,
                                   facecolor="#dddddd" if ignored else SLICE_COLORS[s],
                                   alpha=1.0 if ignored else (0.85 if i == FOCUS else 0.35),
                                   edgecolor="white", linewidth=0.6, hatch="///" if ignored else None))
        w = i % TOKENS_PER_BLOCK
        ax.text(ex0 - 0.6, y0 + rh / 2, f"i={i} warp {w}", ha="right", va="center", fontsize=8.5,
                weight="bold" if i == FOCUS else "normal")
        if ignored:
            ax.text(ex0 + ew / 2, y0 + rh / 2, f"t = {IGNORE}: the warp exits, no partials, dot[{i}] stays 0",
                    ha="center", va="center", fontsize=8.5, color="#444444", bbox=white)
    for x in range(grid_x):
        ylo = e_row_y(min(N, (x + 1) * TOKENS_PER_BLOCK) - 1)
        yhi = e_row_y(x * TOKENS_PER_BLOCK) + rh
        for s in range(grid_y):
            ax.add_patch(Rectangle((xs[s], ylo), xs[s + 1] - xs[s], yhi - ylo, fill=False, edgecolor="black",
                                   linewidth=1.6))
            label_row = x * TOKENS_PER_BLOCK + 1
            ax.text((xs[s] + xs[s + 1]) / 2, e_row_y(label_row) + rh / 2, f"block ({x}, {s})", ha="center",
                    va="center", fontsize=8.5, bbox=white)
    ax.add_patch(Rectangle((ex0, e_row_y(FOCUS)), ew, rh, fill=False, edgecolor="#c0392b", linewidth=2.0))
    ybot = e_row_y(N - 1)
    for s in range(grid_y):
        ax.text((xs[s] + xs[s + 1]) / 2, ybot - 1.0, f"slice y = {s}\n[{bounds[s]}, {bounds[s + 1]})",
                ha="center", va="top", fontsize=8.5, color=SLICE_COLORS[s])
    ax.text(ex0 + ew / 2, ybot - 5.6, f"the last slice has {D - (grid_y - 1) * SLICE_D} elements: "
            f"the loop stops at min(256y + 256, D)", ha="center", va="top", fontsize=8.5)

    # C: V rows; each valid token gathers row t_i.
    cx0, cw = 62.0, 33.0
    crh = (e_row_y(0) + rh - ybot) / V
    ctop = e_row_y(0) + rh

    def c_row_y(t):
        return ctop - (t + 1) * crh

    gathered = {t for t in targets if t != IGNORE}
    ax.text(cx0 + cw / 2, 83.0, "C  [V × D]: row t_i gathered per token", ha="center", fontsize=10.5,
            weight="bold")
    for t in range(V):
        used = t in gathered
        focus = t == targets[FOCUS]
        for s in range(grid_y):
            ax.add_patch(Rectangle((cx0 + cw * bounds[s] / D, c_row_y(t)), cw * (bounds[s + 1] - bounds[s]) / D, crh,
                                   facecolor=SLICE_COLORS[s] if used else "#f2f2f2",
                                   alpha=0.85 if focus else (0.35 if used else 1.0), edgecolor="white",
                                   linewidth=0.4))
        if used:
            ax.text(cx0 + cw + 0.5, c_row_y(t) + crh / 2, f"{t}", ha="left", va="center", fontsize=8,
                    weight="bold" if focus else "normal")
    ax.text(cx0 + cw / 2, ybot - 1.0, f"{len(gathered)} of {V} rows read; row 29 serves tokens 10 and 15\n"
            "(a shared row may come from L2); the other rows are not touched",
            ha="center", va="top", fontsize=8.5)
    for i in range(N):
        y_e = e_row_y(i) + rh / 2
        t = targets[i]
        if t == IGNORE:
            ax.text(ex0 + ew + 0.8, y_e, "t = −100", ha="left", va="center", fontsize=8.5, color="#777777")
            continue
        focus = i == FOCUS
        ax.text(ex0 + ew + 0.8, y_e, f"t = {t}", ha="left", va="center", fontsize=8.5,
                color="#c0392b" if focus else "black", weight="bold" if focus else "normal")
        ax.annotate("", xy=(cx0 - 0.3, c_row_y(t) + crh / 2), xytext=(ex0 + ew + 7.0, y_e),
                    arrowprops=dict(arrowstyle="-|>", color="#c0392b" if focus else "#666666",
                                    lw=1.8 if focus else 0.7, shrinkA=0, shrinkB=0, mutation_scale=8))

    # Bottom: the focus token's partials, their atomicAdds, then finalize.
    t = targets[FOCUS]
    x_f, w_f = FOCUS // TOKENS_PER_BLOCK, FOCUS % TOKENS_PER_BLOCK
    mine = sorted((p for p in partials if p[0] == FOCUS), key=lambda p: p[2])
    ax.text(2.0, 30.5, f"Token i = {FOCUS} (t = {t}): warp {w_f} of blocks ({x_f}, 0) … ({x_f}, {grid_y - 1}), "
            f"one partial dot each", ha="left", va="center", fontsize=10.5, weight="bold")
    box_h, gap = 4.4, 1.3
    ys = [26.5 - (k + 1) * box_h - k * gap for k in range(len(mine))]
    dot_box = (50.0, 9.0, 19.0, 13.0)
    for k, (_, x, y, w, begin, value) in enumerate(mine):
        end = min(begin + SLICE_D, D)
        ax.add_patch(Rectangle((2.0, ys[k]), 38.0, box_h, facecolor=SLICE_COLORS[y], alpha=0.3,
                               edgecolor=SLICE_COLORS[y], linewidth=1.2))
        ax.text(3.0, ys[k] + box_h / 2, f"block ({x}, {y}), warp {w}: k in [{begin}, {end})\n"
                f"Σ C[{t}][k]·E[{FOCUS}][k] over 32 lanes, warp sum = {value:+.6f}",
                ha="left", va="center", fontsize=8.5)
        ax.add_patch(FancyArrowPatch((40.0, ys[k] + box_h / 2), (dot_box[0], dot_box[1] + dot_box[3] / 2),
                                     arrowstyle="-|>", mutation_scale=12, color=SLICE_COLORS[y], lw=1.5,
                                     connectionstyle="arc3,rad=0.0"))
    ax.text(59.5, 25.0, "atomicAdd by lane 0 of each,\nin whatever order the blocks finish", ha="center", va="center",
            fontsize=8.5, bbox=white)
    bx, by, bw, bh = dot_box
    ax.add_patch(Rectangle((bx, by), bw, bh, facecolor="#fdecea", edgecolor="#c0392b", linewidth=1.8))
    terms = " ".join(f"{p[5]:+.3f}" for p in mine)
    ax.text(bx + bw / 2, by + bh / 2, f"dot[{FOCUS}] = z_{FOCUS},{t}\nmemset to 0, then\n0 {terms[:14]}\n"
            f"{terms[14:]}\n= {dot[FOCUS]:+.6f}", ha="center", va="center", fontsize=8.5)
    ax.add_patch(FancyArrowPatch((bx + bw, by + bh / 2), (73.0, by + bh / 2), arrowstyle="-|>",
                                 mutation_scale=14, color="black", lw=1.5))
    fx, fw = 73.0, 25.5
    ax.add_patch(Rectangle((fx, by), fw, bh, facecolor="#f5f5f5", edgecolor="black", linewidth=1.2))
    ax.text(fx + fw / 2, by + bh / 2, "finalize_token_loss (a kernel of\nits own: every atomic has landed)\n"
            f"loss_{FOCUS} = LSE_{FOCUS} − softcap(dot[{FOCUS}])\n= {lse[FOCUS]:.4f} − ({dot[FOCUS]:+.4f})"
            f" = {loss[FOCUS]:.4f}\n(softcap off here)", ha="center", va="center", fontsize=8.5)
    ax.text(fx + fw / 2, 6.5, "ignored tokens 5 and 12: loss 0", ha="center", va="center", fontsize=8.5,
            color="#444444")
    ax.text(2.0, 1.5, "Lane l loads W elements at 256y + W·l, then 32·W further on (D = 1000: W = 8 in bf16, 4 in fp32). "
            "The 1d variant: one warp walks all of D, one plain store.", ha="left", va="center", fontsize=8.5)
    figure_cli.save_png(plt, fig, out)
    return dot, loss


def main(argv):
    parser = Parser(description="Stage 04's indexed dot on a made-up shape, drawn and checked (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    dot, loss = draw(out)
    grid = plan_grid(N, D)
    print(f"{out}: N {N}, D {D}, V {V}, grid {grid[0]} x {grid[1]}, token {FOCUS}: dot {dot[FOCUS]:.12f}, "
          f"loss {loss[FOCUS]:.12f}")
    return figure_cli.verdict(PROG, claims())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
