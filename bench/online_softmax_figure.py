#!/usr/bin/env python3
"""Stage 02's online softmax on one made-up row of logits, drawn value by value.

    /usr/bin/python3 bench/online_softmax_figure.py [--out docs/figures/online_softmax.png] [--seed 2]

No GPU, no data: 48 made-up logits z (noise, with three planted jumps of the
running max), folded in the order they arrive. The state is (m, s): m the
largest value so far, s = Σ exp(z − m) over the values so far. The rules are
those of OnlineSoftmax (stages/02_online_softmax/online_softmax.cuh), in
float64 with exp for __expf:
  - add(z): if z > m, s ← s·exp(m − z) + 1 and m ← z; else s ← s + exp(z − m);
  - merge: m = max(m₁, m₂); return early if m = −∞ (both states empty); else
    s = s₁·exp(m₁ − m) + s₂·exp(m₂ − m);
  - the empty state is (−∞, 0), and LSE = m + log s.
As in the code, add(−∞) on the empty state gives NaN (exp(−∞ − (−∞))); stage
02's logits are finite. A chunk whose values are all −∞ is skipped, as stage
03's fold_tile_into_rows (online_fold.cuh) skips a tile past V.

The figure shows (top) the logits in arrival order and the running max m as a
step line; (bottom) s after each value, in the frame of the current max: at
each new max the old s drops to s·exp(m_old − m_new) before the new value adds
1, and the last s is Σ exp(z − max z); (right) the merge of the two halves'
states into the one-pass state.

The script asserts what the figure shows, in float64: s after each add is
Σ exp(z − m) over the values so far; after the whole row, m = max z and
LSE = m + log s = log Σ exp(z) computed directly (to 1e-12); merging the two
halves' states gives the one-pass (m, s); merge(a, b) = merge(b, a); merging
with the empty state changes nothing and two empty states stay empty; a row
of −∞ except one value z_k gives LSE = z_k. Exit 1 (DOES NOT HOLD) when one
fails; 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "online_softmax.png"
V = 48                                     # the row's length
JUMPS = ((9, 1.5), (21, 1.2), (34, 0.9))   # planted new maxima: (position, rise over the max before it)
EMPTY = (-math.inf, 0.0)

PROG = "online_softmax_figure.py"
Parser = figure_cli.parser_class(PROG)


def add(state, z):
    """OnlineSoftmax::add."""
    m, s = state
    if z > m:
        return z, s * math.exp(m - z) + 1.0  # exp(−inf) = 0 for the first value
    return m, s + math.exp(z - m)


def merge(a, b):
    """OnlineSoftmax::merge: a merged with b (a is `this`)."""
    m = max(a[0], b[0])
    if m == -math.inf:
        return a  # both empty
    return m, a[1] * math.exp(a[0] - m) + b[1] * math.exp(b[0] - m)


def lse(state):
    """OnlineSoftmax::lse."""
    return state[0] + math.log(state[1])


def fold(values, state=EMPTY):
    """One pass of add over values; returns the state after each value."""
    states = []
    for z in values:
        state = add(state, z)
        states.append(state)
    return states


def fold_chunk(state, values):
    """A chunk at once, as fold_tile_into_rows: its max, one rescale of s, then its exps; all −∞: skipped."""
    chunk_max = max(values)
    if chunk_max == -math.inf:
        return state
    m = max(state[0], chunk_max)
    return m, state[1] * math.exp(state[0] - m) + sum(math.exp(z - m) for z in values)


def make_row(seed):
    """48 logits: noise around 0, and a new maximum planted at each of JUMPS' positions."""
    import numpy as np
    z = np.random.default_rng(seed).normal(0.0, 0.8, V)
    for position, rise in JUMPS:
        z[position] = z[:position].max() + rise
    return [float(x) for x in z]


def direct(values):
    """log Σ exp(z) and Σ exp(z − max z), computed directly."""
    top = max(values)
    total = math.fsum(math.exp(z - top) for z in values)
    return top + math.log(total), total


def close(a, b, tol=1e-12):
    return abs(a - b) <= tol * max(1.0, abs(b))


def claims(z):
    """(holds, what) for each thing the figure shows."""
    states = fold(z)
    running = all(m == max(z[:i + 1]) and close(s, math.fsum(math.exp(x - m) for x in z[:i + 1]))
                  for i, (m, s) in enumerate(states))
    one_pass = states[-1]
    row_lse, row_sum = direct(z)
    half = len(z) // 2
    a, b = fold(z[:half])[-1], fold(z[half:])[-1]
    ab, ba = merge(a, b), merge(b, a)
    thirds = [fold(z[i:i + 16])[-1] for i in (0, 16, 32)]
    grouped = (merge(merge(thirds[0], thirds[1]), thirds[2]), merge(thirds[0], merge(thirds[1], thirds[2])))

    k = 30
    lonely = [-math.inf] * len(z)
    lonely[k] = z[k]
    first = [z[k]] + [-math.inf] * (len(z) - 1)
    chunks = [fold_chunk(EMPTY, lonely[i:i + 8]) for i in range(0, len(z), 8)]
    merged = EMPTY
    for chunk in chunks:
        merged = merge(merged, chunk)
    return [
        (running, "after each add, m is the max so far and s = Σ exp(z − m) over the values so far (rescaled at "
                  "each new max)"),
        (one_pass[0] == max(z) and close(one_pass[1], row_sum) and abs(lse(one_pass) - row_lse) <= 1e-12,
         "after the whole row, m = max z, s = Σ exp(z − max z) and LSE = m + log s = log Σ exp(z) (1e-12)"),
        (ab[0] == one_pass[0] and close(ab[1], one_pass[1]),
         "merging the two halves' states gives the one-pass (m, s)"),
        (ab == ba, "merge(a, b) = merge(b, a)"),
        (grouped[0][0] == grouped[1][0] and close(grouped[0][1], grouped[1][1]) and close(lse(grouped[0]), row_lse),
         "merge((a, b), c) = merge(a, (b, c)) over thirds of the row"),
        (merge(a, EMPTY) == a and merge(EMPTY, a) == a, "merging with the empty state (−∞, 0) changes nothing"),
        (merge(EMPTY, EMPTY) == EMPTY, "two empty states merge into the empty state (no NaN)"),
        (fold(first)[-1] == (z[k], 1.0) and lse(fold(first)[-1]) == z[k],
         "a row of −∞ after one value z: each −∞ adds exp(−∞) = 0, and LSE = z"),
        (merged == (z[k], 1.0),
         "a row of −∞ except one value z, in chunks (all-−∞ chunks skipped) then merged: LSE = z"),
    ]


def draw(out, z):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    states = fold(z)
    m = np.array([st[0] for st in states])
    s = np.array([st[1] for st in states])
    x = np.arange(len(z))
    rises = [i for i in range(1, len(z)) if m[i] > m[i - 1]]
    row_lse, row_sum = direct(z)
    half = len(z) // 2
    a, b = fold(z[:half])[-1], fold(z[half:])[-1]
    merged = merge(a, b)

    z_color, m_color, s_color, drop_color, one_color = "#4d4d4d", "#d95f02", "#1f78b4", "#e7298a", "#1b9e77"
    h1_color, h2_color = "#9ecae1", "#fdae6b"
    plt.rcParams.update({"font.size": 11})
    fig = plt.figure(figsize=(10.0, 8.6))
    grid = fig.add_gridspec(2, 2, width_ratios=[2.35, 1], height_ratios=[1, 1.1], left=0.075, right=0.985,
                            top=0.885, bottom=0.075, wspace=0.32, hspace=0.3)
    fig.suptitle("Online softmax on one row: one pass, a running state (m, s)", fontsize=14, weight="bold", y=0.985)
    fig.text(0.5, 0.935, f"{len(z)} made-up logits $z_j$ arrive in order; m = the max so far, "
             "s = Σ exp(z − m) over the values so far", ha="center", fontsize=11, color="#444444")

    # top: the logits and the running max
    top = fig.add_subplot(grid[0, 0])
    floor = min(z) - 0.6
    top.axvspan(-0.5, half - 0.5, color=h1_color, alpha=0.18, lw=0)
    top.axvspan(half - 0.5, len(z) - 0.5, color=h2_color, alpha=0.18, lw=0)
    top.vlines(x, floor, z, color="#bdbdbd", lw=0.8)
    top.plot(x, z, "o", color=z_color, ms=4.5, label="logit $z_j$", zorder=3)
    top.step(np.append(x, len(z) - 0.5), np.append(m, m[-1]), where="post", color=m_color, lw=2.2,
             label="running max m", zorder=2)
    top.plot(rises, [z[i] for i in rises], "o", ms=9, mfc="none", mec=drop_color, mew=1.8,
             label="a new max: s is rescaled", zorder=4)
    top.set_xlim(-0.5, len(z) - 0.5)
    top.set_ylim(floor, max(z) + 2.7)
    top.set_ylabel("z")
    top.set_xlabel("position j in the row (the order the values arrive)")
    top.text(half - 1, max(z) + 2.2, "half 1 → $(m_1, s_1)$", ha="right", va="center", fontsize=10.5,
             color="#2171b5")
    top.text(half, max(z) + 2.2, "half 2 → $(m_2, s_2)$", ha="left", va="center", fontsize=10.5,
             color="#d94801")
    top.legend(loc="upper center", bbox_to_anchor=(0.5, 0.92), ncol=3, fontsize=9.5, framealpha=0.92)
    top.set_title("(a) the logits and the running max m", fontsize=11.5, loc="left")

    # top right: the rules
    rules = fig.add_subplot(grid[0, 1])
    rules.axis("off")
    lines = [
        ("the state (m, s)", "#222222", "bold"),
        ("m: the max, s = Σ exp(z − m)", "#222222", "normal"),
        ("empty: (−∞, 0); add(z) gives (z, 1)", "#222222", "normal"),
        ("", None, None),
        ("add(z)", "#222222", "bold"),
        ("z > m:  s ← s·$e^{m-z}$ + 1,  m ← z", drop_color, "normal"),
        ("else:     s ← s + $e^{z-m}$", s_color, "normal"),
        ("", None, None),
        ("merge((m₁, s₁), (m₂, s₂))", "#222222", "bold"),
        ("m = max($m_1$, $m_2$)", "#222222", "normal"),
        ("s = $s_1 e^{m_1-m}$ + $s_2 e^{m_2-m}$", "#222222", "normal"),
        ("", None, None),
        ("LSE = m + log s", "#222222", "bold"),
    ]
    y = 0.96
    for text, color, weight in lines:
        if text:
            rules.text(-0.05, y, text, ha="left", va="top", fontsize=10.5, color=color, weight=weight,
                       transform=rules.transAxes)
        y -= 0.083
    rules.set_title("the rules (online_softmax.cuh)", fontsize=11.5, loc="left", x=-0.05)

    # bottom: the running sum in the current max's frame
    bottom = fig.add_subplot(grid[1, 0], sharex=top)
    bottom.axvspan(-0.5, half - 0.5, color=h1_color, alpha=0.18, lw=0)
    bottom.axvspan(half - 0.5, len(z) - 0.5, color=h2_color, alpha=0.18, lw=0)
    for i in range(1, len(z)):
        if i in rises:  # the old s held at the new value, then the drop and the +1
            bottom.plot([i - 1, i - 0.15], [s[i - 1], s[i - 1]], color=s_color, lw=1.2, zorder=2)
        else:
            bottom.plot([i - 1, i], [s[i - 1], s[i]], color=s_color, lw=1.2, zorder=2)
    bottom.plot(x, s, "o", color=s_color, ms=4, label="s after adding $z_j$", zorder=5)
    for i in rises:
        factor = math.exp(m[i - 1] - m[i])
        low = s[i - 1] * factor
        bottom.annotate("", xy=(i - 0.15, low), xytext=(i - 0.15, s[i - 1]),
                        arrowprops=dict(arrowstyle="-|>", color=drop_color, lw=2.0, mutation_scale=12,
                                        shrinkA=0, shrinkB=0), zorder=4)
        bottom.plot([i - 0.15, i + 0.15, i + 0.15], [low, low, s[i]], color=one_color, lw=2.4, zorder=4)
        bottom.text(i, low - 0.06 * max(s), f"×{factor:.2f}", ha="center", va="top", fontsize=9.5,
                    color=drop_color)
    bottom.plot([], [], color=drop_color, lw=2, label="a new max: s ← s·$e^{m_{old} - m_{new}}$")
    bottom.plot([], [], color=one_color, lw=2.4, label="then + 1, the new max's $e^{z - m}$ = $e^0$")
    bottom.axhline(row_sum, color="#333333", ls="--", lw=1.2, label="Σ exp(z − max z), computed directly",
                   zorder=1)
    bottom.set_ylim(0, max(s) * 1.6)
    bottom.set_ylabel("s (in the frame of the current m)")
    bottom.set_xlabel("position j in the row")
    bottom.legend(loc="upper left", fontsize=9.5, framealpha=0.92)
    bottom.text(len(z) - 1, max(s) * 1.55, f"the last state: m = {m[-1]:.3f}, s = {s[-1]:.3f}\n"
                f"LSE = m + log s = {lse(states[-1]):.4f}\n= log Σ exp(z), computed directly",
                ha="right", va="top", fontsize=9.5, bbox=dict(boxstyle="round", fc="white", ec="#999999"))
    bottom.set_title("(b) the running sum s: it drops at each new max, then grows", fontsize=11.5, loc="left")

    # bottom right: the merge of the halves
    mg = fig.add_subplot(grid[1, 1])
    scale1, scale2 = math.exp(a[0] - merged[0]), math.exp(b[0] - merged[0])
    mg.bar(0, a[1], color=h1_color, edgecolor="#2171b5", width=0.6)
    mg.bar(1, b[1], color=h2_color, edgecolor="#d94801", width=0.6)
    mg.bar(2.4, a[1] * scale1, color=h1_color, edgecolor="#2171b5", width=0.6)
    mg.bar(2.4, b[1] * scale2, bottom=a[1] * scale1, color=h2_color, edgecolor="#d94801", width=0.6)
    peak = max(a[1], b[1], merged[1])
    mg.text(0, a[1] + 0.03 * peak, f"$s_1$ = {a[1]:.2f}\n$m_1$ = {a[0]:.2f}", ha="center", va="bottom",
            fontsize=9.5)
    mg.text(1, b[1] + 0.03 * peak, f"$s_2$ = {b[1]:.2f}\n$m_2$ = {b[0]:.2f}", ha="center", va="bottom",
            fontsize=9.5)
    mg.text(2.4, merged[1] + 0.03 * peak, f"s = {merged[1]:.2f}\nm = {merged[0]:.2f}", ha="center",
            va="bottom", fontsize=9.5)
    mg.annotate("", xy=(2.0, peak * 0.3), xytext=(1.4, peak * 0.3),
                arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.6))
    mg.text(1.7, peak * 0.34, "merge", ha="center", va="bottom", fontsize=9.5, color="#444444")
    mg.set_xticks([0, 1, 2.4])
    mg.set_xticklabels(["half 1", "half 2", "merged"])
    mg.set_xlim(-0.7, 3.0)
    mg.set_ylim(0, peak * 2.1)
    mg.set_ylabel("s")
    mg.text(0.5, 0.975, f"m = max($m_1$, $m_2$) = {merged[0]:.2f}\n"
            f"s = {a[1]:.2f}·$e^{{{a[0] - merged[0]:.2f}}}$ + {b[1]:.2f}·$e^{{{b[0] - merged[0]:.2f}}}$\n"
            "= the one pass's (m, s)", ha="center", va="top", fontsize=9.5, transform=mg.transAxes)
    mg.set_title("(c) merge of the two halves", fontsize=11.5, loc="left")

    figure_cli.save_png(plt, fig, out)


def main(argv):
    parser = Parser(description="Stage 02's online softmax on one made-up row, drawn and checked (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    figure_cli.add_seed_flag(parser, 2, "the made-up row's noise")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    z = make_row(args.seed)
    draw(out, z)
    states = fold(z)
    rises = sum(1 for i in range(1, len(z)) if states[i][0] > states[i - 1][0])
    print(f"{out}: {len(z)} logits, {rises} rescales after the first value, LSE {lse(states[-1]):.12f}, "
          f"direct {direct(z)[0]:.12f}")
    return figure_cli.verdict(PROG, claims(z))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
