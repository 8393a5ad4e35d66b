#!/usr/bin/env python3
"""Stage 10's dense chunks (README point 7) on a made-up chunk: q against the target's logit, S = α·q.

    /usr/bin/python3 bench/scaled_rows_figure.py [--out docs/figures/scaled_rows.png] [--seed 3]

No GPU, no data: a chunk of N = 6 rows, D = 16, V = 64, logits z = E·Cᵀ from made-up E and C (row 4's target
planted far below its row's other logits), mean reduction (g_i = 1/N). In float64, as
stages/10_plan_per_batch/dense_backward.cu computes them:
  - R_i = z_it, the target's logit (stage 04's indexed dot);
  - the forward keeps q_ij = exp(z_ij − R_i), rounded to bf16;
  - α_i = g_i·exp(R_i − LSE_i) once the fold has LSE_i; a row with LSE_i − R_i > 40 (kMostReferenceGap) runs the
    forward again with R_i = LSE_i;
  - the target's entry of Q becomes 0 and its term S_it = g_i·(p_it − 1), made in fp32, is added apart (q_it = 1
    would lose p_it − 1 in bf16 where p_it is near 1; S_it/α_i, about −V on a flat row, would round the term that
    dominates that row);
  - dE's rows = α ∘ (Q·C) + S_it·C_t and dC = Qᵀ·(α ∘ E) + Σ_{t_i = t} S_it·E_i.
No softcap here (softcap' multiplies q and changes nothing below).

The figure shows (a) one row's logits, R_i and LSE_i; (b) the same row's q (kept) and g·p (exact) on a log scale:
parallel, one factor α apart, and S_it, added apart; (c) each row's LSE_i − R_i (its loss) against the 40
nats above which the row runs again with R_i = LSE_i.

The script asserts what the figure shows: with q unrounded, α_i·q_ij = S_ij off the target (1e-12), and the two
products with the target's terms equal S·C and Sᵀ·E (1e-12); every q_ij ≤ exp(LSE_i − R_i), so a row within 40 nats keeps q below e^40,
far inside bf16's range; q rounded to bf16 moves each S_ij off the target by at most 2^-8 of itself; a far row is found and, run
with R_i = LSE_i, keeps q ≤ 1. Exit 1 (DOES NOT HOLD) when one fails; 2 on a bad flag. Needs numpy and matplotlib.
"""

import math
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "docs" / "figures" / "scaled_rows.png"
N, D, V = 6, 16, 64
SHOWN_ROW = 1           # the row drawn in (a) and (b)
FAR_ROW = 4             # its target planted far below its row's logits
MOST_REFERENCE_GAP = 40.0  # kMostReferenceGap in stages/10_plan_per_batch/dense_backward.cu
BF16_UNIT = 2.0 ** -8      # bf16 keeps 8 significant bits: rounding to nearest moves a value by at most 2^-8 of it

PROG = "scaled_rows_figure.py"
Parser = figure_cli.parser_class(PROG)


def to_bf16(x):
    """Round to nearest even bf16 (the top 16 bits of an fp32), returned as float64."""
    import numpy as np
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(np.float64)


def make_chunk(seed):
    """E [N, D], C [V, D], targets [N]: the targets among each row's larger logits, row FAR_ROW's far below."""
    import numpy as np
    rng = np.random.default_rng(seed)
    e = rng.normal(0.0, 1.0, (N, D))
    c = rng.normal(0.0, 0.6, (V, D))
    z = e @ c.T
    targets = np.array([int(np.argsort(z[i])[-1 - (i % 3)]) for i in range(N)])  # the 1st to 3rd largest
    targets[FAR_ROW] = int(np.argmin(z[FAR_ROW]))
    # Make the far row's target about 45 nats below its largest logit: scale that row of E.
    gap = z[FAR_ROW].max() - z[FAR_ROW, targets[FAR_ROW]]
    e[FAR_ROW] *= 46.0 / gap
    return e, c, targets


def lse_rows(z):
    import numpy as np
    top = z.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(z - top).sum(axis=1, keepdims=True)))[:, 0]


def plan(e, c, targets, rounded=True):
    """What the dense chunk computes: R, LSE, α, Q (bf16 when rounded, its target entries 0), S_it, dE, dC, and
    which rows ran again with R = LSE."""
    import numpy as np
    z = e @ c.T
    rows = np.arange(N)
    g = np.full(N, 1.0 / N)
    lse = lse_rows(z)
    reference = z[rows, targets].copy()
    again = lse - reference > MOST_REFERENCE_GAP
    reference[again] = lse[again]
    q = np.exp(z - reference[:, None])
    alpha = g * np.exp(reference - lse)
    target_term = g * np.expm1(z[rows, targets] - lse)
    q[rows, targets] = 0.0
    if rounded:
        q = to_bf16(q)
    de = alpha[:, None] * (q @ c) + target_term[:, None] * c[targets]
    dc = q.T @ (alpha[:, None] * e)
    np.add.at(dc, targets, target_term[:, None] * e)
    return {"z": z, "lse": lse, "reference": reference, "again": again, "q": q, "alpha": alpha, "g": g,
            "target_term": target_term, "de": de, "dc": dc}


def exact(e, c, targets):
    """S = g·(softmax − onehot) and its two products, in float64."""
    import numpy as np
    z = e @ c.T
    p = np.exp(z - lse_rows(z)[:, None])
    s = p.copy()
    s[np.arange(N), targets] -= 1.0
    s /= N
    return s, s @ c, s.T @ e


def rel(a, b):
    import numpy as np
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def claims(e, c, targets):
    """(holds, what) for each thing the figure shows."""
    import numpy as np
    s, de, dc = exact(e, c, targets)
    unrounded = plan(e, c, targets, rounded=False)
    kept = plan(e, c, targets)
    off_target = np.ones((N, V), dtype=bool)
    off_target[np.arange(N), targets] = False
    scaled = unrounded["alpha"][:, None] * unrounded["q"]
    first_reference = unrounded["z"][np.arange(N), targets]
    q_first = np.exp(unrounded["z"] - first_reference[:, None])
    within = unrounded["lse"] - first_reference <= MOST_REFERENCE_GAP
    s_kept = kept["alpha"][:, None] * kept["q"]
    moved = np.abs(s_kept - s) <= BF16_UNIT * np.abs(s) * (1 + 1e-9)
    return [
        (np.allclose(scaled[off_target], s[off_target], rtol=1e-12, atol=0.0),
         "off the target, α_i·q_ij = S_ij = g_i·p_ij (q unrounded, 1e-12)"),
        (bool(np.all(unrounded["q"][~off_target] == 0.0))
         and np.allclose(unrounded["target_term"], s[~off_target], rtol=1e-12, atol=0.0),
         "on the target, Q holds 0 and S_it = g_i·(p_it − 1) comes apart (1e-12)"),
        (rel(unrounded["de"], de) <= 1e-12, "dE's rows = α ∘ (Q·C) + S_it·C_t equal S·C (q unrounded, 1e-12)"),
        (rel(unrounded["dc"], dc) <= 1e-12, "dC = Qᵀ·(α ∘ E) + Σ S_it·E_i equals Sᵀ·E (q unrounded, 1e-12)"),
        (bool(np.all(q_first <= np.exp(unrounded["lse"] - first_reference)[:, None] * (1 + 1e-12))),
         "every q_ij = exp(z_ij − R_i) is at most exp(LSE_i − R_i)"),
        (bool(np.all(q_first[within] <= math.exp(MOST_REFERENCE_GAP))) and math.exp(MOST_REFERENCE_GAP) < 3.0e38,
         "a row within 40 nats of its target keeps every q below e^40, far inside bf16's range (3.4e38)"),
        (bool(np.all(moved[off_target])), "q rounded to bf16 moves each S_ij off the target by at most 2^-8 of itself"),
        (bool(unrounded["again"][FAR_ROW]) and int(unrounded["again"].sum()) == 1,
         f"row {FAR_ROW}, its target planted about 46 nats down, is the one row run again with R = LSE"),
        (bool(np.all(unrounded["q"][FAR_ROW] <= 1.0 + 1e-12)), "run with R_i = LSE_i, the far row keeps q ≤ 1"),
    ]


def draw(out, e, c, targets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    s, _, _ = exact(e, c, targets)
    r = plan(e, c, targets)
    i, t = SHOWN_ROW, int(targets[SHOWN_ROW])
    z = r["z"][i]
    cols = np.arange(V)
    others = cols != t
    z_color, ref_color, lse_color, q_color, p_color, far_color = "#4d4d4d", "#1b9e77", "#d95f02", "#1f78b4", \
        "#7570b3", "#e7298a"

    plt.rcParams.update({"font.size": 10.5})
    fig = plt.figure(figsize=(12.0, 8.4))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.55, 1], height_ratios=[1, 1.05], left=0.07, right=0.985,
                            top=0.88, bottom=0.08, wspace=0.25, hspace=0.38)
    fig.suptitle("Stage 10's dense chunks: keep q against the target's logit, scale each row by α afterwards",
                 fontsize=13.5, weight="bold", y=0.985)
    fig.text(0.5, 0.932, f"a made-up chunk: N = {N} rows, D = {D}, V = {V}, mean reduction (g = 1/N), float64; "
             "q rounded to bf16 as the forward stores it", ha="center", fontsize=10.5, color="#444444")

    # (a) one row's logits
    ax = fig.add_subplot(grid[0, 0])
    ax.vlines(cols, z.min() - 1, z, color="#cccccc", lw=0.8)
    ax.plot(cols[others], z[others], "o", color=z_color, ms=4, label="logit $z_{ij}$")
    ax.plot([t], [z[t]], "*", color=ref_color, ms=15, label="the target's logit $R_i = z_{it}$", zorder=4)
    ax.axhline(r["reference"][i], color=ref_color, lw=1.2, ls="--")
    ax.axhline(r["lse"][i], color=lse_color, lw=1.6, label="$LSE_i$ (known only after the whole row)")
    ax.annotate("", xy=(V + 1.5, r["reference"][i]), xytext=(V + 1.5, r["lse"][i]),
                arrowprops=dict(arrowstyle="<->", color="#444444", lw=1.3))
    ax.text(V + 2.3, (r["reference"][i] + r["lse"][i]) / 2, f"LSE − R\n= {r['lse'][i] - r['reference'][i]:.2f}",
            va="center", fontsize=9.5)
    ax.set_xlim(-1, V + 9)
    ax.set_ylim(z.min() - 1, r["lse"][i] + 4.0)
    ax.set_xlabel("vocabulary entry j")
    ax.set_ylabel("z")
    ax.legend(loc="upper left", fontsize=9, ncol=3, framealpha=0.92, borderaxespad=0.3)
    ax.set_title(f"(a) row {i}: R_i is fixed before the forward, LSE_i is not", fontsize=11, loc="left")

    # the rules
    rules = fig.add_subplot(grid[0, 1])
    rules.axis("off")
    lines = [
        ("before the forward", "#222222", "bold"),
        ("$R_i = z_{it}$  (stage 04's indexed dot)", ref_color, "normal"),
        ("the forward keeps, in bf16", "#222222", "bold"),
        ("$q_{ij} = e^{z_{ij} - R_i}$ · softcap'$(z_{ij})$", q_color, "normal"),
        ("once the fold has $LSE_i$", "#222222", "bold"),
        ("$α_i = g_i\\, e^{R_i - LSE_i}$,   $S_{ij} = α_i\\, q_{ij}$", "#222222", "normal"),
        ("$q_{it} = 0$;  $S_{it} = g_i\\,(p_{it} - 1)$ in fp32, apart", ref_color, "normal"),
        ("the products read q as it was kept", "#222222", "bold"),
        ("dE rows = α ∘ (Q·C) + $S_{it}\\, C_t$", "#222222", "normal"),
        ("dC = $Q^T$·(α ∘ E) + $Σ_i\\, S_{it}\\, E_i$", "#222222", "normal"),
        ("$LSE_i - R_i$ > 40: forward again, $R_i = LSE_i$", far_color, "normal"),
    ]
    y = 0.98
    for text, color, weight in lines:
        rules.text(-0.02, y, text, ha="left", va="top", fontsize=10.5, color=color, weight=weight,
                   transform=rules.transAxes)
        y -= 0.09
    rules.set_title("the rules (dense_backward.cu)", fontsize=11, loc="left", x=-0.02)

    # (b) q and g·p on a log scale
    bx = fig.add_subplot(grid[1, 0])
    q = r["q"][i]
    gp = r["g"][i] * np.exp(z - r["lse"][i])
    bx.semilogy(cols[others], q[others], "o", color=q_color, ms=4.5, label="$q_{ij}$ kept (bf16)")
    bx.semilogy(cols[others], gp[others], "s", mfc="none", mec=p_color, ms=5,
                label="$g_i\\,p_{ij}$ = $S_{ij}$, computed directly")
    bx.semilogy([t], [abs(s[i, t])], "*", color=ref_color, ms=14, label="$|S_{it}| = g_i(1 - p_{it})$: apart, in fp32")
    j = int(np.argmax(np.where(others, q, -1)))
    bx.annotate("", xy=(j + 0.6, gp[j]), xytext=(j + 0.6, q[j]),
                arrowprops=dict(arrowstyle="-|>", color="#444444", lw=1.5))
    bx.text(j + 1.4, math.sqrt(q[j] * gp[j]), f"× $α_i$ = {r['alpha'][i]:.3g}\nfor every j of the row",
            va="center", fontsize=9.5)
    bx.set_xlim(-1, V + 9)
    bx.set_ylim(min(gp[others].min(), q[others].min()) / 300, max(q.max(), gp.max()) * 8)
    bx.set_xlabel("vocabulary entry j")
    bx.set_ylabel("value (log scale)")
    bx.legend(loc="lower left", fontsize=9, framealpha=0.92, ncol=3, borderaxespad=0.3)
    bx.set_title("(b) row %d: q and S are one factor apart, row by row" % i, fontsize=11, loc="left")

    # (c) each row's LSE − R against the rerun threshold
    cx = fig.add_subplot(grid[1, 1])
    first_reference = r["z"][np.arange(N), targets]
    gaps = r["lse"] - first_reference
    colors = [far_color if gap > MOST_REFERENCE_GAP else ref_color for gap in gaps]
    cx.bar(np.arange(N), gaps, color=colors, width=0.6)
    cx.axhline(MOST_REFERENCE_GAP, color=far_color, ls="--", lw=1.3)
    cx.text(N - 0.6, MOST_REFERENCE_GAP + 1, "40 nats", ha="right", va="bottom", color=far_color, fontsize=9.5)
    for row, gap in enumerate(gaps):
        cx.text(row, gap + 0.6, f"{gap:.1f}", ha="center", va="bottom", fontsize=9)
    cx.text(FAR_ROW - 0.45, gaps[FAR_ROW] * 0.55, "forward again\nwith $R_i = LSE_i$", ha="right", va="center",
            fontsize=9.5, color=far_color)
    cx.set_xticks(np.arange(N))
    cx.set_xlabel("row i of the chunk")
    cx.set_ylabel("$LSE_i - R_i$ (nats)")
    cx.set_ylim(0, max(gaps) * 1.18)
    cx.set_title("(c) every q of a row is below $e^{LSE_i - R_i}$", fontsize=11, loc="left")

    figure_cli.save_png(plt, fig, out, colors="rgb")


def main(argv):
    parser = Parser(description="Stage 10's dense chunks on a made-up chunk, drawn and checked (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    figure_cli.add_seed_flag(parser, 3, "the made-up chunk's seed")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    e, c, targets = make_chunk(args.seed)
    draw(out, e, c, targets)
    s, de, dc = exact(e, c, targets)
    kept = plan(e, c, targets)
    print(f"{out}: N={N} D={D} V={V}, rows run again {int(kept['again'].sum())}, with q in bf16 dE rel "
          f"{rel(kept['de'], de):.3e}, dC rel {rel(kept['dc'], dc):.3e}")
    return figure_cli.verdict(PROG, claims(e, c, targets))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
