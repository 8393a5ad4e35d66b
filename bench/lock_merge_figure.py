#!/usr/bin/env python3
"""Stage 05's locked merge of the partial LSEs, drawn as a timeline of a few units.

    /usr/bin/python3 bench/lock_merge_figure.py [--out docs/figures/lock_merge.png] [--seed 5]

No GPU and no data: a small discrete-event simulation of LockedLseEpilogue::end
(stages/05_lse_locks/locked_lse.cuh), with made-up finish times and step
durations. A unit is a token block × a range of vocabulary tiles. When its last
tile is folded, merge_row_states leaves team thread k with row k's partial
(m, s), and the unit merges it into the global LSE under the lock of the
team's rows:
  - team thread 0 spins on atomicCAS(lock, 0, 1), with __nanosleep(64)
    between tries, until it returns 0, then issues fence.acq_rel.gpu;
  - Team::sync(); each team thread writes
    lse[row] = log_add_exp(__ldcg(&lse[row]), m + log s) with __stcg;
  - Team::sync(); team thread 0 issues fence.acq_rel.gpu, then
    atomicExch(lock, 0).
The LSE starts at −∞ (fill_kernel) and log_add_exp(−∞, x) = x, so the first
unit to merge needs no special case. log_add_exp is the code's, in float64:
m = max(a, b); −∞ if m = −∞; else m + log1p(exp(min(a, b) − m)). A unit's
partial is stage 03's fold (fold_tile_into_rows, online_fold.cuh): per tile,
its max, one rescale, then its exps; columns past V are −∞. Each atomic takes
effect when its step starts; a read of the LSE returns what is in memory
then, and a write lands when its step ends.

The figure shows (a) the units of one token block finishing their tiles at
different times, spinning while another unit holds the lock (each failed
atomicCAS marked), and the steps of each merge, with the lock's holder above
them; (b) one row's LSE in memory after each merge, from −∞ to the full
row's LSE; (c) the memory against stage 03: partial [S·N] (m, s) pairs and
merge_ranges_kernel there, one LSE per row and a lock per team's rows here.

The script asserts, in float64, on two token blocks of made-up logits: the
drawn protocol is the code's (locked_lse.cuh holds atomicCAS(lock, 0, 1),
__nanosleep(64), two fence.acq_rel.gpu and atomicExch(lock, 0), in that
order); merging the units in the simulated order gives each row's
log Σ exp(z) to 1e-12; every order of the merges gives the same LSE to 1e-12
(not bitwise: the rounding depends on the order); at most one unit holds a
token block's lock at any time, and each unit reads and writes the LSE only
while it holds it; every unit merges exactly once (its partial is in each
row's final LSE once); a unit waits in the drawn token block. Exit 1
(DOES NOT HOLD) when one fails; 2 on a bad flag. Needs numpy and matplotlib.
"""

import heapq
import itertools
import math
import re
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
LOCKED_LSE = REPO / "stages" / "05_lse_locks" / "locked_lse.cuh"
DEFAULT_OUT = REPO / "docs" / "figures" / "lock_merge.png"
TOLERANCE = 1e-12

# The made-up problem: 2 token blocks of ROWS rows; V columns in RANGES ranges of TILES tiles of TILE_COLS.
ROWS, RANGES, TILES, TILE_COLS = 6, 5, 3, 8
V = RANGES * TILES * TILE_COLS - 5           # the last tile holds 3 columns past V (−∞)
TOKEN_BLOCKS = 2
DRAWN_BLOCK, DRAWN_ROW = 1, 0

# When each unit's last tile is folded (made-up), per token block, by range; jittered by --seed.
FINISH = {0: (2.0, 7.6, 2.5, 11.0, 14.1), 1: (2.8, 12.3, 1.2, 12.9, 3.65)}
# The steps of LockedLseEpilogue::end, in the code's order, and their made-up durations.
PROTOCOL = ("cas", "fence", "sync", "read", "write", "sync", "fence", "exch")
DURATION = {"cas": 0.6, "sleep": 0.1, "fence": 0.5, "sync": 0.1, "read": 1.0, "write": 0.4, "exch": 0.3}

# Gemma-2's shape on the pipeline, for the memory panel (stage 03's plan: 35 ranges; 128-row tiles, 64-row teams).
GEMMA2_N, GEMMA2_RANGES, GEMMA2_BM, GEMMA2_TEAM_ROWS = 8192, 35, 128, 64

PROG = "lock_merge_figure.py"
Parser = figure_cli.parser_class(PROG)


def log_add_exp(a, b):
    """log_add_exp of locked_lse.cuh."""
    m = max(a, b)
    if m == -math.inf:
        return -math.inf
    return m + math.log1p(math.exp(min(a, b) - m))


def fold_tile(state, values):
    """fold_tile_into_rows on one row of one tile: its max, one rescale, then its exps; all −∞: unchanged."""
    tile_max = max(values)
    if tile_max == -math.inf:
        return state
    m = max(state[0], tile_max)
    return m, state[1] * math.exp(state[0] - m) + sum(math.exp(z - m) for z in values)


def partial_lse(row, r):
    """Unit r's partial of one row: its tiles folded from the empty state, then OnlineSoftmax::lse (m + log s)."""
    state = (-math.inf, 0.0)
    first = r * TILES * TILE_COLS
    for t in range(TILES):
        cols = range(first + t * TILE_COLS, first + (t + 1) * TILE_COLS)
        state = fold_tile(state, [row[c] if c < V else -math.inf for c in cols])
    return state[0] + math.log(state[1])


def make_logits(seed):
    """TOKEN_BLOCKS × ROWS rows of V made-up logits; each row's max planted in a range of its own."""
    import numpy as np
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 1.5, (TOKEN_BLOCKS, ROWS, V))
    for b in range(TOKEN_BLOCKS):
        for i in range(ROWS):
            col = int(rng.integers(0, V))
            z[b, i, col] += 6.0
    return [[[float(x) for x in z[b, i]] for i in range(ROWS)] for b in range(TOKEN_BLOCKS)]


def finish_times(seed):
    import numpy as np
    rng = np.random.default_rng(seed + 1000)
    return {b: [t + float(rng.uniform(-0.08, 0.08)) for t in FINISH[b]] for b in FINISH}


def try_lock(memory, lock):
    """atomicCAS(lock, 0, 1): the old value, 0 when this thread took the lock."""
    old = memory[lock]
    if old == 0:
        memory[lock] = 1
    return old


def simulate(logits, finish):
    """Runs every unit's end() to completion, in time order. Returns per unit (b, r) its events, and the LSE."""
    lse = {(b, i): -math.inf for b in range(TOKEN_BLOCKS) for i in range(ROWS)}
    merged = {key: [] for key in lse}            # which units' partials the value in memory holds
    locks = {b: 0 for b in range(TOKEN_BLOCKS)}  # a lock per team's rows: here one team per token block
    units = {}
    queue, order = [], itertools.count()
    for b in range(TOKEN_BLOCKS):
        for r in range(RANGES):
            units[(b, r)] = {"finish": finish[b][r], "tries": [], "steps": [], "acquire": None, "release": None,
                             "read": None, "write": None, "partial": [partial_lse(logits[b][i], r)
                                                                     for i in range(ROWS)]}
            heapq.heappush(queue, (finish[b][r], next(order), (b, r), 0, False))
    merge_order = {b: [] for b in range(TOKEN_BLOCKS)}
    while queue:
        t, _, key, step, lands = heapq.heappop(queue)
        b, _ = key
        unit = units[key]
        if lands:                               # the write reaches memory
            for i, (old, holds) in enumerate(unit["seen"]):
                lse[(b, i)] = log_add_exp(old, unit["partial"][i])
                merged[(b, i)] = holds + [key]
            merge_order[b].append(key)
            continue
        kind = PROTOCOL[step]
        end = t + DURATION[kind]
        if kind == "cas":
            if try_lock(locks, b) != 0:         # held: __nanosleep(64), then try again
                unit["tries"].append(t)
                heapq.heappush(queue, (end + DURATION["sleep"], next(order), key, step, False))
                continue
            unit["acquire"] = t
        elif kind == "read":                    # every team thread: __ldcg(&lse[row])
            unit["read"] = t
            unit["seen"] = [(lse[(b, i)], list(merged[(b, i)])) for i in range(ROWS)]
        elif kind == "write":                   # __stcg of log_add_exp(old, m + log s), landing at the step's end
            unit["write"] = end
            heapq.heappush(queue, (end, next(order), key, step, True))
        elif kind == "exch":                    # atomicExch(lock, 0)
            locks[b] = 0
            unit["release"] = t
        unit["steps"].append((kind, t, end))
        if step + 1 < len(PROTOCOL):
            heapq.heappush(queue, (end, next(order), key, step + 1, False))
    return units, lse, merged, merge_order


def direct_lse(row):
    top = max(row)
    return top + math.log(math.fsum(math.exp(z - top) for z in row))


def close(a, b):
    return abs(a - b) <= TOLERANCE * max(1.0, abs(b))


def protocol_in_code():
    """The protocol's calls, in the order locked_lse.cuh makes them."""
    text = LOCKED_LSE.read_text()
    body = text[text.index("void end("):]
    wanted = [r"Team::rank\(\) == 0", r"atomicCAS\(lock, 0, 1\) != 0\) __nanosleep\(64\)", r"fence\.acq_rel\.gpu",
              r"Team::sync\(\)", r"__stcg\(&p\.lse\[row\], log_add_exp\(__ldcg\(&p\.lse\[row\]\), state\.lse\(\)\)\)",
              r"Team::sync\(\)", r"Team::rank\(\) == 0", r"fence\.acq_rel\.gpu", r"atomicExch\(lock, 0\)"]
    pos = 0
    for pattern in wanted:
        found = re.compile(pattern).search(body, pos)
        if not found:
            return False
        pos = found.end()
    return len(re.findall(r"fence\.acq_rel\.gpu", body)) == 2 and body.count("Team::sync()") == 2


def claims(logits, finish):
    units, lse, merged, merge_order = simulate(logits, finish)
    direct = {(b, i): direct_lse(logits[b][i]) for b in range(TOKEN_BLOCKS) for i in range(ROWS)}
    simulated = all(close(lse[key], direct[key]) for key in lse)

    every_order, bitwise = True, True
    for b in range(TOKEN_BLOCKS):
        for i in range(ROWS):
            partials = [units[(b, r)]["partial"][i] for r in range(RANGES)]
            for perm in itertools.permutations(range(RANGES)):
                value = -math.inf
                for r in perm:
                    value = log_add_exp(value, partials[r])
                every_order &= close(value, direct[(b, i)])
                bitwise &= value == lse[(b, i)]

    exclusive = True
    for b in range(TOKEN_BLOCKS):
        held = [(u["acquire"], u["release"], u["read"], u["write"]) for (ub, _), u in units.items() if ub == b]
        if any(None in times for times in held):
            exclusive = False
            continue
        held.sort()
        exclusive &= all(acquire <= read < write <= release for acquire, release, read, write in held)
        exclusive &= all(held[k][1] <= held[k + 1][0] for k in range(len(held) - 1))

    once = all(sorted(merged[(b, i)]) == [(b, r) for r in range(RANGES)] for (b, i) in merged)
    drawn = [units[(DRAWN_BLOCK, r)] for r in range(RANGES)]
    return [
        (protocol_in_code(), "the drawn protocol is locked_lse.cuh's: atomicCAS(lock, 0, 1) with __nanosleep(64), "
                             "fence.acq_rel.gpu, Team::sync(), __ldcg then __stcg of the LSE, Team::sync(), "
                             "fence.acq_rel.gpu, atomicExch(lock, 0)"),
        (simulated, f"merging the units' partials under the lock, in the simulated order, gives each row's "
                    f"log Σ exp(z) ({TOLERANCE:g})"),
        (every_order, f"every order of the {RANGES} merges gives each row's log Σ exp(z) ({TOLERANCE:g}; "
                      "not bitwise)"),
        (exclusive, "at most one unit holds a token block's lock at any time, and each unit reads and writes the "
                    "LSE only while it holds it"),
        (once, "every unit merges exactly once: its partial is in each of its rows' final LSE once"),
        (any(u["tries"] for u in drawn) and len(merge_order[DRAWN_BLOCK]) == RANGES,
         "in the drawn token block, a unit waits while another holds the lock"),
    ], units, lse, direct, bitwise


def draw(out, logits, finish):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    units, _, _, merge_order = simulate(logits, finish)
    b, i0 = DRAWN_BLOCK, DRAWN_ROW
    drawn = {r: units[(b, r)] for r in range(RANGES)}
    order = merge_order[b]
    rank = {key[1]: k + 1 for k, key in enumerate(order)}
    t_end = max(u["release"] for u in drawn.values()) + DURATION["exch"]
    t_lo, t_hi = 0.0, t_end + 1.2

    fold_c, spin_c, acq_c, merge_c, rel_c = "#d9d9d9", "#e31a1c", "#fdae61", "#4575b4", "#66bd63"
    phase_color = {"acquire": acq_c, "merge": merge_c, "release": rel_c}
    plt.rcParams.update({"font.size": 10.5})
    fig = plt.figure(figsize=(10.0, 9.6))
    grid = fig.add_gridspec(3, 2, width_ratios=[2.05, 1], height_ratios=[1.5, 0.9, 0.8], left=0.115,
                            right=0.995, top=0.885, bottom=0.035, wspace=0.06, hspace=0.4)
    fig.suptitle("Stage 05: the units merge their partial LSEs into the rows' LSE, one unit at a time",
                 fontsize=13.5, weight="bold", y=0.985)
    fig.text(0.5, 0.94, f"{RANGES} units (token block {b} × vocabulary range r) finish their tiles at made-up times. "
             "One lock guards the team's rows\n(the block's 128 on a block-level product, a consumer warpgroup's 64 "
             "on the pipeline); units of other token blocks take other locks.", ha="center", va="center",
             fontsize=9.8, color="#444444")

    # (a) the timeline
    ax = fig.add_subplot(grid[0, 0])
    y_lock = RANGES + 0.35
    height = 0.56
    for r, u in drawn.items():
        y = RANGES - 1 - r
        ax.add_patch(Rectangle((t_lo, y - height / 2), u["finish"] - t_lo, height, fc=fold_c, ec="none"))
        if u["tries"]:
            ax.add_patch(Rectangle((u["finish"], y - height / 2), u["acquire"] - u["finish"], height, fc="white",
                                   ec=spin_c, hatch="////", lw=0.8))
            ax.plot(u["tries"], [y + height / 2 + 0.13] * len(u["tries"]), "v", color=spin_c, ms=5)
        phase = "acquire"  # the figure's colours: up to the read, the read and the write, after the write
        for kind, t0, t1 in u["steps"]:
            phase = "merge" if kind in ("read", "write") else "release" if phase == "merge" else phase
            ax.add_patch(Rectangle((t0, y - height / 2), t1 - t0, height, fc=phase_color[phase], ec="white",
                                   lw=0.6))
        ax.text(u["release"] + DURATION["exch"] + 0.15, y, f"#{rank[r]}", ha="left", va="center", fontsize=9.5,
                weight="bold", color="#222222")
        # the lock's holder
        ax.add_patch(Rectangle((u["acquire"], y_lock - 0.3), u["release"] - u["acquire"], 0.6, fc="#fee08b",
                               ec="#8c6d00", lw=1))
        ax.text((u["acquire"] + u["release"]) / 2, y_lock, f"held by ({b}, {r})", ha="center", va="center",
                fontsize=8.5)
        ax.plot([u["acquire"]] * 2, [y + height / 2, y_lock - 0.3], color="#8c6d00", lw=0.6, ls=":")
        ax.plot([u["release"]] * 2, [y + height / 2, y_lock - 0.3], color="#8c6d00", lw=0.6, ls=":")
    ax.axhline(RANGES - 0.35, color="#999999", lw=0.6)
    ax.set_yticks([y_lock] + [RANGES - 1 - r for r in range(RANGES)])
    ax.set_yticklabels([f"lock of\ntoken block {b}"] + [f"unit ({b}, {r})" for r in range(RANGES)])
    ax.set_xlim(t_lo, t_hi)
    ax.set_ylim(-1.5, RANGES + 0.8)
    ax.set_xlabel("time (made-up units)")
    latest = max(drawn, key=lambda r: drawn[r]["finish"])
    ax.text(t_lo + 0.3, RANGES - 1 - latest, "folding its tiles (stage 03's fold)", ha="left", va="center",
            fontsize=8.5, color="#555555")
    wr = max(drawn, key=lambda r: len(drawn[r]["tries"]))
    waiter = drawn[wr]
    ax.annotate(f"spinning while other units hold the lock: {len(waiter['tries'])} tries of\n"
                "atomicCAS return 1 (▼), with __nanosleep(64) after each", xy=((waiter["finish"] +
                waiter["acquire"]) / 2, RANGES - 1 - wr - height / 2), xytext=(waiter["acquire"] + 0.6,
                RANGES - 1 - wr - 1.0), fontsize=8.5, color=spin_c, va="center",
                arrowprops=dict(arrowstyle="-|>", color=spin_c, lw=0.9))
    ax.set_title("(a) the units' ends, and the lock (#k: the k-th unit to take it)", fontsize=11, loc="left")

    # (b) the row's LSE in memory
    bx = fig.add_subplot(grid[1, 0], sharex=ax)
    writes = sorted((drawn[key[1]]["write"], key[1]) for key in order)
    value, xs, ys = -math.inf, [], []
    for t, r in writes:
        value = log_add_exp(value, drawn[r]["partial"][i0])
        xs.append(t)
        ys.append(value)
    full = direct_lse(logits[b][i0])
    low = min(ys) - 0.6 * (full - min(ys) + 0.5)
    bx.step([t_lo] + xs + [t_hi], [low] + ys + [ys[-1]], where="post", color=merge_c, lw=2)
    bx.axhline(full, color="#333333", ls="--", lw=1)
    bx.text(t_lo + 0.3, full + 0.04 * (full - low), "log Σ exp(z) over the whole row, computed directly",
            fontsize=8.5, va="bottom", color="#333333")
    bx.text(t_lo + 0.3, low + 0.04 * (full - low), "−∞ (fill_kernel)", fontsize=8.5, va="bottom", color=merge_c)
    for t, y, (_, r) in zip(xs, ys, writes):
        bx.plot(t, y, "o", color=merge_c, ms=5)
        bx.text(t + 0.2, y - 0.05 * (full - low), f"({b}, {r})", fontsize=8.5, va="top", color=merge_c)
    bx.set_ylim(low, full + 0.35 * (full - low))
    bx.set_ylabel(f"lse[row {i0}]")
    bx.set_xlabel("time (made-up units)")
    bx.set_title(f"(b) row {i0}'s LSE in memory, after each unit's write", fontsize=11, loc="left")

    # the protocol, as the code has it: the key to (a)'s colours
    px = fig.add_subplot(grid[0, 1])
    px.axis("off")
    px.set_title("LockedLseEpilogue::end,\nin locked_lse.cuh", fontsize=10.5, loc="left", x=0.02)
    code = [
        (fold_c, "after the tiles: (m, s) per row", "normal"),
        (spin_c, "team thread 0:", "normal"),
        (spin_c, " while (atomicCAS(lock, 0, 1) != 0)", "mono"),
        (spin_c, "   __nanosleep(64);", "mono"),
        (acq_c, " fence.acq_rel.gpu", "mono"),
        (acq_c, "Team::sync()", "mono"),
        (merge_c, "team thread k, its row < N:", "normal"),
        (merge_c, " old = __ldcg(&lse[row])", "mono"),
        (merge_c, " __stcg(&lse[row],", "mono"),
        (merge_c, "   log_add_exp(old, m + log s))", "mono"),
        (rel_c, "Team::sync()", "mono"),
        (rel_c, "team thread 0:", "normal"),
        (rel_c, " fence.acq_rel.gpu", "mono"),
        (rel_c, " atomicExch(lock, 0)", "mono"),
    ]
    y, step = 0.99, 0.0705
    for color, text, style in code:
        px.add_patch(Rectangle((0.02, y - step + 0.006), 0.03, step - 0.012, fc=color, ec="none",
                               transform=px.transAxes, hatch="////" if color == spin_c else None))
        px.text(0.08, y - step / 2, text, ha="left", va="center", fontsize=8.3 if style == "mono" else 9,
                family="monospace" if style == "mono" else None, transform=px.transAxes, color="#222222")
        y -= step

    nx = fig.add_subplot(grid[1, 1])
    nx.axis("off")
    notes = ("lse starts at −∞, and\nlog_add_exp(−∞, x) = x:\nthe first unit needs no special case.\n\n"
             "Team thread 0 takes the lock for\nthe whole team. Its fence, then the\nbarrier, order the team's reads\n"
             "after the acquire; the barrier, then\nits fence, the team's writes before\nthe release.\n\nAny order of the merges gives the\nsame LSE up to rounding (not\nbitwise).")
    nx.text(0.05, 1.02, notes, ha="left", va="top", fontsize=9.2, transform=nx.transAxes, linespacing=1.25)

    # (c) memory against stage 03
    mx = fig.add_subplot(grid[2, :])
    mx.axis("off")
    mx.set_xlim(0, 100)
    mx.set_ylim(0, 30)
    mx.set_title("(c) memory beyond the inputs: stage 03 against stage 05 (numbers at Gemma-2's shape, pipeline)",
                 fontsize=11, loc="left")
    s03 = GEMMA2_RANGES * GEMMA2_N * 8
    locks = (GEMMA2_N + GEMMA2_BM - 1) // GEMMA2_BM * (GEMMA2_BM // GEMMA2_TEAM_ROWS)
    # stage 03: an S × N grid of pairs, a second kernel, the LSE
    cell_w, cell_h = 2.0, 2.6
    for s in range(5):
        for n in range(8):
            mx.add_patch(Rectangle((3 + n * cell_w, 4 + s * cell_h), cell_w, cell_h, fc="#c6dbef", ec="white",
                                   lw=0.8))
    mx.text(3 + 4 * cell_w, 4 + 5 * cell_h + 0.8, "partial [S·N]: one (m, s) per unit and row", ha="center",
            va="bottom", fontsize=9)
    mx.text(3 + 4 * cell_w, 0.6, f"S·N·8 B = {GEMMA2_RANGES}·{GEMMA2_N}·8 = {s03 / 1e6:.2f} MB", ha="center",
            va="center", fontsize=9)
    mx.annotate("", xy=(28.5, 10.5), xytext=(20.5, 10.5), arrowprops=dict(arrowstyle="-|>", lw=1.4, color="#444444"))
    mx.text(24.5, 12, "a second\nkernel", ha="center", va="bottom", fontsize=8.5, color="#444444")
    for n in range(8):
        mx.add_patch(Rectangle((29 + n * 1.6, 9.2), 1.6, cell_h, fc="#9ecae1", ec="white", lw=0.8))
    mx.text(35.4, 8.2, "LSE [N]", ha="center", va="top", fontsize=9)
    mx.text(22, 27.5, "stage 03: merge_ranges_kernel merges each row's S partials", ha="center", fontsize=9.5,
            weight="bold")
    # stage 05: the units write straight into the LSE, under a lock per team's rows
    x0 = 54
    mx.text(x0 + 20, 27.5, "stage 05: the units merge into the LSE as they finish", ha="center", fontsize=9.5,
            weight="bold")
    for k in range(5):
        mx.add_patch(Rectangle((x0 + k * 5.5, 19), 4.5, 3, fc=merge_c, ec="none", alpha=0.8))
        mx.annotate("", xy=(x0 + 12 + k * 0.8, 13.3), xytext=(x0 + 2.25 + k * 5.5, 19),
                    arrowprops=dict(arrowstyle="-|>", lw=0.9, color=merge_c))
    mx.text(x0 + 28.5, 20.5, "a token block's units,\neach at its end", ha="left", va="center", fontsize=8.5)
    for n in range(8):
        mx.add_patch(Rectangle((x0 + 2 + n * 2.5, 10.5), 2.5, cell_h, fc="#9ecae1", ec="white", lw=0.8))
    mx.text(x0 + 23.5, 12.6, "LSE [N]: one value a row,\n−∞ at first", ha="left", va="center", fontsize=8.5)
    for n in range(2):
        mx.add_patch(Rectangle((x0 + 2 + n * 10, 4.6), 10, 1.6, fc="#fee08b", ec="#8c6d00", lw=0.8))
    mx.text(x0 + 23.5, 5.4, "locks: an int per team's\nrows, 0 at first", ha="left", va="center", fontsize=8.5)
    mx.text(x0 + 20, 0.6, f"no partials, no second kernel; locks 2·⌈N/128⌉·4 B = {locks * 4} B", ha="center",
            va="center", fontsize=9)
    mx.plot([50, 50], [1, 28], color="#bbbbbb", lw=0.8)

    figure_cli.save_png(plt, fig, out)


def main(argv):
    parser = Parser(description="Stage 05's locked merge of the partial LSEs, simulated, drawn and checked (no GPU).")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    figure_cli.add_seed_flag(parser, 5, "the made-up logits and finish times")
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    figure_cli.require_plotting(PROG)

    logits, finish = make_logits(args.seed), finish_times(args.seed)
    draw(out, logits, finish)
    results, units, lse, direct, bitwise = claims(logits, finish)
    waits = sum(len(u["tries"]) for (ub, _), u in units.items() if ub == DRAWN_BLOCK)
    spread = max(abs(lse[key] - direct[key]) for key in lse)
    print(f"{out}: {TOKEN_BLOCKS} token blocks × {RANGES} ranges, {waits} failed atomicCAS in token block "
          f"{DRAWN_BLOCK}; largest |LSE − direct| {spread:.2e}; every merge order bitwise the same: "
          f"{'yes' if bitwise else 'no'}")
    return figure_cli.verdict(PROG, results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
