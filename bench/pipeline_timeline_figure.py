#!/usr/bin/env python3
"""The Hopper pipeline's protocol as a timeline, from a small discrete-event simulation.

    python3 bench/pipeline_timeline_figure.py [--out docs/figures/pipeline_timeline.png]
        [--copy 2] [--wgmma 2] [--epilogue 6] [--k-tiles 6] [--tiles 3]

No GPU, and the durations are made up (plain time units). The simulation runs
one block of wgmma_pipeline_kernel (common/tile/wgmma_pipeline.cuh) over one
unit of --tiles tiles of --k-tiles k-slices each. Its producer and consumers
are generators written line by line after the kernel's two loops:
  - the producer (thread 0): for each slice, wait on empty[stage] with parity
    phase ^ 1, arrive on full[stage] with expect_tx of the stage's bytes, then
    the two copies, E (128 rows × 64 columns) and C (256 rows × 64 columns);
  - each consumer: wait on full[stage] with parity phase, commit its group of
    wgmmas on the slice; after a tile's first slice, wgmma_wait<1> and release
    the previous slice (one arrival on empty per warp, 4 per consumer); after
    the tile's last slice, wgmma_wait<0>, the last release, and the epilogue.
The mbarriers count arrivals and bytes and complete phases as the hardware's
do; try_wait.parity(p) returns once the phase of parity p has completed.
Kept simple: a slice's copies take --copy, one copy at a time, each in
proportion to its bytes; one consumer's group of wgmmas on a slice takes
--wgmma on the tensor cores, which run one group at a time, in the order they
were committed; an epilogue takes --epilogue on the consumer alone. The
shape (kBM, kBN, kBK, kStages, kConsumers) is read from wgmma_pipeline_shape.h.
Clusters of two (kPairs) are left out.

The rows: the producer's copies, each stage's slice (from its copy's start to
its release by both consumers), each consumer's groups, waits and epilogues,
and the tensor cores, busy or idle. The script asserts what the figure is drawn
to show: a copy into a stage starts only after both consumers released the
slice kStages before; no consumer's wgmmas read a slice before its copy
landed; each slice is released exactly once by each consumer, after its
wgmmas finished; each stage's barriers complete one phase per pass over the
ring, so every wait sees the parity it asks for; at most kStages slices are
in shared memory at once. Exit 1 (DOES NOT HOLD) when one fails; 2 on a bad flag. Needs matplotlib (and so NumPy).
"""

import heapq
import re
import sys
from pathlib import Path

import figure_cli

SHAPE_HEADER = Path(__file__).resolve().parent.parent / "common" / "tile" / "wgmma_pipeline_shape.h"
WARPS = 4  # warps per consumer warpgroup: one arrival on empty each


PROG = "pipeline_timeline_figure.py"
Parser = figure_cli.parser_class(PROG)


def fail(message, status=2):
    figure_cli.fail(PROG, message, status)


def read_shape(path=SHAPE_HEADER):
    """kBM, kBN, kBK, kStages, kConsumers as wgmma_pipeline_shape.h sets them."""
    try:
        text = path.read_text()
    except OSError as error:
        fail(f"{path}: {error}")
    shape = {}
    for name in ("kBM", "kBN", "kBK", "kStages", "kConsumers"):
        found = re.search(rf"\b{name}\s*=\s*(\d+)", text)
        if not found:
            fail(f"{path}: no {name} = <number>")
        shape[name] = int(found.group(1))
    shape["a_bytes"] = shape["kBM"] * shape["kBK"] * 2  # bf16
    shape["b_bytes"] = shape["kBN"] * shape["kBK"] * 2
    shape["stage_bytes"] = shape["a_bytes"] + shape["b_bytes"]
    return shape


class Barrier:
    """An mbarrier: a phase completes when its arrivals are in and its expected bytes have landed."""

    def __init__(self, name, arrivals, log):
        self.name, self.count, self.log = name, arrivals, log
        self.pending, self.tx, self.completed = arrivals, 0, 0

    def arrive(self, now):
        self.pending -= 1
        self.settle(now)

    def expect_tx(self, now, nbytes):  # mbarrier.arrive.expect_tx
        self.tx += nbytes
        self.arrive(now)

    def complete_tx(self, now, nbytes):  # a copy's bytes have landed
        self.tx -= nbytes
        self.settle(now)

    def settle(self, now):
        if self.pending < 0:
            self.log["errors"].append(f"{self.name}: more arrivals than its count in phase {self.completed}")
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def try_wait(self, parity):  # mbarrier.try_wait.parity: has the phase of this parity completed?
        return self.completed % 2 != parity


def simulate(shape, copy, wgmma, epilogue, k_tiles, tiles):
    """Runs the protocol; returns the log of events (times in made-up units)."""
    stages, consumers = shape["kStages"], shape["kConsumers"]
    log = {"copies": [], "groups": [], "releases": [], "waits": [], "waited": [], "epilogues": [], "issues": [],
           "errors": []}
    full = [Barrier(("full", s), 1, log) for s in range(stages)]
    empty = [Barrier(("empty", s), consumers * WARPS, log) for s in range(stages)]
    events = []  # (time, order, action)
    order = [0]
    link = {"free": 0.0}
    cores = {"free": 0.0}
    in_flight = [[] for _ in range(consumers)]  # each consumer's committed groups, oldest first

    def at(time, action):
        order[0] += 1
        heapq.heappush(events, (time, order[0], action))

    def tma_load(now, g, s, part, nbytes, barrier):  # one bulk copy; the copies share the link, in order
        start = max(now, link["free"])
        end = start + copy * nbytes / shape["stage_bytes"]
        link["free"] = end
        log["copies"].append({"slice": g, "stage": s, "part": part, "start": start, "end": end})
        at(end, lambda t: barrier.complete_tx(t, nbytes))

    def commit_group(now, c, g, s):  # wgmma.commit_group: the group runs when the tensor cores are free
        start = max(now, cores["free"])
        cores["free"] = start + wgmma
        group = {"consumer": c, "slice": g, "stage": s, "commit": now, "start": start, "end": start + wgmma}
        log["groups"].append(group)
        in_flight[c].append(group)

        at(group["end"], lambda t: in_flight[c].remove(group))

    def release(now, c, g, s):  # lane 0 of each of the consumer's 4 warps arrives on empty[s]
        log["releases"].append({"consumer": c, "slice": g, "stage": s, "time": now})
        for _ in range(WARPS):
            empty[s].arrive(now)

    # The kernel's loops; each yield is a wait: ("barrier", barrier, parity, what), ("wgmma", n), ("busy", time).
    def producer(now):
        stage, phase = 0, 0
        for t in range(tiles):
            for kt in range(k_tiles):
                g = t * k_tiles + kt
                yield ("barrier", empty[stage], phase ^ 1, ("producer", g, stage))
                log["issues"].append({"slice": g, "stage": stage, "time": now[0]})
                full[stage].expect_tx(now[0], shape["stage_bytes"])
                tma_load(now[0], g, stage, "E", shape["a_bytes"], full[stage])
                tma_load(now[0], g, stage, "C", shape["b_bytes"], full[stage])
                stage += 1
                if stage == stages:
                    stage, phase = 0, phase ^ 1

    def consumer(c, now):
        stage, phase = 0, 0
        for t in range(tiles):
            previous = 0
            for kt in range(k_tiles):
                g = t * k_tiles + kt
                yield ("barrier", full[stage], phase, ("consumer", c, g, stage))
                commit_group(now[0], c, g, stage)
                if kt > 0:
                    yield ("wgmma", 1)
                    release(now[0], c, g - 1, previous)
                previous = stage
                stage += 1
                if stage == stages:
                    stage, phase = 0, phase ^ 1
            yield ("wgmma", 0)
            release(now[0], c, t * k_tiles + k_tiles - 1, previous)
            start = now[0]
            yield ("busy", epilogue)
            log["epilogues"].append({"consumer": c, "tile": t, "start": start, "end": now[0]})

    clocks = {"producer": [0.0]}
    procs = {"producer": producer(clocks["producer"])}
    for c in range(consumers):
        clocks[c] = [0.0]
        procs[c] = consumer(c, clocks[c])
    waiting = {name: None for name in procs}  # what each process waits on, and since when
    busy_until = {}

    def ready(name, now):
        why = waiting[name]
        if why is None:
            return True
        kind = why[0]
        if kind == "barrier":
            return why[1].try_wait(why[2])
        if kind == "wgmma":
            return len(in_flight[name]) <= why[1]
        return now >= busy_until[name]

    now = 0.0
    while True:
        moved = True
        while moved:  # run every process that can run at this time, until all wait
            moved = False
            for name, proc in list(procs.items()):
                if not ready(name, now):
                    continue
                why = waiting[name]
                if why is not None and why[0] in ("barrier", "wgmma") and why[-1] < now:
                    log["waits"].append({"who": name, "kind": why[0], "start": why[-1], "end": now,
                                         "what": why[3] if why[0] == "barrier" else why[1]})
                if why is not None and why[0] == "barrier":
                    log["waited"].append({"what": why[3], "parity": why[2], "time": now,
                                                         "completed": why[1].completed})
                clocks[name][0] = now
                try:
                    step = next(proc)
                except StopIteration:
                    del procs[name]
                    moved = True
                    continue
                if step[0] == "busy":
                    busy_until[name] = now + step[1]
                    at(busy_until[name], lambda t: None)
                    waiting[name] = ("busy",)
                else:
                    waiting[name] = step + (now,)
                moved = True
        if not events:
            break
        now, _, action = heapq.heappop(events)
        action(now)
        while events and events[0][0] == now:
            action = heapq.heappop(events)[2]
            action(now)
    log["stuck"] = [f"consumer {name + 1} waits forever" if name != "producer" else "the producer waits forever"
                    for name in procs]
    log["end"] = now
    log["full_completed"] = [b.completed for b in full]
    log["empty_completed"] = [b.completed for b in empty]
    return log


def check(log, shape, k_tiles, tiles):
    """What the figure claims, as (holds, what) pairs."""
    stages, consumers = shape["kStages"], shape["kConsumers"]
    slices = k_tiles * tiles
    landed = {}
    copy_start = {}
    for cp in log["copies"]:
        landed[cp["slice"]] = max(landed.get(cp["slice"], 0.0), cp["end"])
        copy_start[cp["slice"]] = min(copy_start.get(cp["slice"], cp["start"]), cp["start"])
    released = {}
    for r in log["releases"]:
        released.setdefault((r["slice"], r["consumer"]), []).append(r)
    both = {g: max(r["time"] for c in range(consumers) for r in released.get((g, c), [])) for g in range(slices)
            if all((g, c) in released for c in range(consumers))}
    group_of = {(gr["slice"], gr["consumer"]): gr for gr in log["groups"]}

    no_overwrite = all(g in copy_start and g - stages in both and copy_start[g] >= both[g - stages]
                       for g in range(stages, slices))
    reads_landed = all((g, c) in group_of and group_of[(g, c)]["commit"] >= landed[g]
                       for g in range(slices) for c in range(consumers))
    once = all(len(released.get((g, c), [])) == 1 and released[(g, c)][0]["time"] >= group_of[(g, c)]["end"]
               for g in range(slices) for c in range(consumers))
    same_stage = all(cp["stage"] == cp["slice"] % stages for cp in log["copies"]) and \
        all(r["stage"] == r["slice"] % stages for r in log["releases"]) and \
        all(gr["stage"] == gr["slice"] % stages for gr in log["groups"])
    # One phase per pass: slice g is pass g // kStages of stage g % kStages. The producer's wait for it returns
    # with exactly that many empty phases done; a consumer's with exactly pass + 1 full phases done.
    passes = [len(range(s, slices, stages)) for s in range(stages)]
    parity_ok = all(w["completed"] == (w["what"][1] // stages if w["what"][0] == "producer"
                                       else w["what"][2] // stages + 1) for w in log["waited"])
    parity_ok = parity_ok and log["full_completed"] == passes and log["empty_completed"] == passes
    resident = max_resident(log, shape)
    return [
        (not log["stuck"] and not log["errors"],
         "the protocol runs to its end, with no extra arrival: " + "; ".join(log["errors"] + log["stuck"])),
        (same_stage, "slice g goes through stage g mod kStages"),
        (no_overwrite, "a copy into a stage starts only after both consumers released the slice kStages before"),
        (reads_landed, "no consumer commits wgmmas on a slice before its copy landed"),
        (once, "each slice is released exactly once by each consumer, after its wgmmas finished"),
        (parity_ok, "each stage's full and empty barriers complete one phase per pass over the ring"),
        (resident <= stages, f"at most kStages slices are in shared memory at once ({resident})"),
    ]


def residency(log, shape):
    """(slice, stage, from, to): from its copy's start to its release by both consumers."""
    start, end = {}, {}
    for cp in log["copies"]:
        start[cp["slice"]] = min(start.get(cp["slice"], cp["start"]), cp["start"])
    for r in log["releases"]:
        end[r["slice"]] = max(end.get(r["slice"], r["time"]), r["time"])
    return [(g, g % shape["kStages"], start[g], end.get(g, float("inf"))) for g in sorted(start)]


def max_resident(log, shape):
    points = []
    for _, _, a, b in residency(log, shape):
        points += [(a, 1), (b, -1)]
    most = now = 0
    for _, step in sorted(points, key=lambda p: (p[0], p[1])):  # a release before a copy at the same time
        now += step
        most = max(most, now)
    return most


def draw(log, shape, args):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    stages, consumers = shape["kStages"], shape["kConsumers"]
    tile_colours = ["#f3dc7a", "#a9d89f", "#d4b3e6", "#f0b3b3"]
    consumer_colours = ["#2f6fb0", "#d2691e"]
    rows = ["producer\n(thread 0)"] + [f"stage {s}" for s in range(stages)] + \
        [f"consumer {c + 1}\n(warpgroup {c + 1})" for c in range(consumers)] + ["tensor cores"]
    prod_y, stage_y0 = 0, 1
    cons_y0, tc_y = 1 + stages, 1 + stages + consumers
    end = log["end"]

    fig, ax = plt.subplots(figsize=(11.5, 7.2))
    fig.subplots_adjust(left=0.115, right=0.985, top=0.835, bottom=0.205)
    ax.set_ylim(len(rows) - 0.35, -0.65)
    ax.set_xlim(-0.5, end + 0.5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=10)
    ax.tick_params(axis="y", length=0)
    ax.set_xlabel("time (made-up units)", fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    for y in (0.5, stages + 0.5, stages + consumers + 0.5):
        ax.axhline(y, color="0.75", lw=0.8)

    def box(x0, x1, y, h, colour, text=None, fontsize=8.5, **kw):
        ax.add_patch(Rectangle((x0, y - h / 2), x1 - x0, h, facecolor=colour, edgecolor="0.25", lw=0.6, **kw))
        if text is not None:
            ax.text((x0 + x1) / 2, y, text, ha="center", va="center", fontsize=fontsize)

    def tile_of(g):
        return g // args.k_tiles

    # The producer: each slice's two copies, E then C, into stage g mod kStages, and when thread 0 issued them
    # (its wait on empty[s] had returned).
    span = {}
    for cp in log["copies"]:
        g = cp["slice"]
        box(cp["start"], cp["end"], prod_y, 0.6, tile_colours[tile_of(g) % 4])
        a, b = span.get(g, (cp["start"], cp["end"]))
        span[g] = (min(a, cp["start"]), max(b, cp["end"]))
    for g, (a, b) in span.items():
        ax.text((a + b) / 2, prod_y, f"{g}\n→{g % stages}", ha="center", va="center", fontsize=7.5,
                linespacing=0.95)
    for issue in log["issues"]:
        ax.plot([issue["time"]], [prod_y - 0.42], marker="v", ms=5, color="black", ls="none")

    # The stages: which slice each holds, from its copy's start to its release by both consumers.
    landed = {}
    for cp in log["copies"]:
        landed[cp["slice"]] = max(landed.get(cp["slice"], 0.0), cp["end"])
    for g, s, a, b in residency(log, shape):
        y = stage_y0 + s
        colour = tile_colours[tile_of(g) % 4]
        box(a, landed[g], y, 0.62, colour, hatch="////", alpha=0.55)
        box(landed[g], b, y, 0.62, colour)
        k = g // stages
        ax.text((landed[g] + b) / 2, y - 0.1, f"{g}", ha="center", va="center", fontsize=9.5, weight="bold")
        parity = f"phase {k}, parity {k % 2}" if b - landed[g] > 9 else f"parity {k % 2}"
        ax.text((landed[g] + b) / 2, y + 0.19, parity, ha="center", va="center", fontsize=7, color="0.2")
    for r in log["releases"]:
        y = stage_y0 + r["stage"]
        ax.plot([r["time"]] * 2, [y - 0.38, y + 0.38], color=consumer_colours[r["consumer"]], lw=2.0)

    # The consumers: their groups on the tensor cores (labelled by slice), their waits, their epilogues.
    for gr in log["groups"]:
        y = cons_y0 + gr["consumer"]
        box(gr["start"], gr["end"], y, 0.55, consumer_colours[gr["consumer"]], f"{gr['slice']}", fontsize=8.5,
            alpha=0.85)
        if gr["start"] > gr["commit"]:  # committed, waiting for the other consumer's group
            ax.plot([gr["commit"], gr["start"]], [y, y], color=consumer_colours[gr["consumer"]], lw=1.0,
                    ls=(0, (2, 2)))
    for w in log["waits"]:
        if w["who"] != "producer" and w["kind"] == "barrier":
            y = cons_y0 + w["who"]
            s = w["what"][3]
            ax.plot([w["start"], w["end"]], [y + 0.36] * 2, color="crimson", lw=2.2, solid_capstyle="butt")
            if w["end"] - w["start"] >= 3:
                ax.text((w["start"] + w["end"]) / 2, y + 0.4, f"waits full[{s}]", ha="center", va="top",
                        fontsize=7, color="crimson")
    for e in log["epilogues"]:
        box(e["start"], e["end"], cons_y0 + e["consumer"], 0.55, "0.82", f"epilogue\ntile {e['tile']}", fontsize=8)

    # The tensor cores: whose group runs, and the idle time.
    busy = sorted((gr["start"], gr["end"], gr["consumer"]) for gr in log["groups"])
    for a, b, c in busy:
        box(a, b, tc_y, 0.5, consumer_colours[c], None, alpha=0.85)
    idle, t = [], 0.0
    for a, b, _ in busy + [(end, end, None)]:
        if a > t:
            idle.append((t, a))
        t = max(t, b)
    for a, b in idle:
        ax.add_patch(Rectangle((a, tc_y - 0.25), b - a, 0.5, facecolor="white", edgecolor="crimson", hatch="xx",
                               lw=0.6))
    busy_time = sum(b - a for a, b, _ in busy)
    labels = ax.get_yticklabels()
    labels[tc_y].set_text(f"tensor cores\n(busy {100 * busy_time / end:.0f}%)")
    ax.set_yticklabels(labels, fontsize=10)

    fig.text(0.5, 0.982, f"The Hopper pipeline's ring (wgmma_pipeline.cuh), simulated: one block, {args.tiles} "
             f"tiles of {args.k_tiles} k-slices, kStages = {stages}", ha="center", va="top", fontsize=12,
             weight="bold")
    header = [
        f"Made-up durations: a slice's two copies (E {shape['kBM']}×{shape['kBK']}, then C "
        f"{shape['kBN']}×{shape['kBK']}: {shape['stage_bytes'] // 1024} KB) take {args.copy:g}, one copy at a time; "
        f"one consumer's wgmmas on a slice (its {shape['kBM'] // consumers} rows) {args.wgmma:g}; an epilogue "
        f"{args.epilogue:g}.",
        f"Slice g (tile g // {args.k_tiles}, k-slice g mod {args.k_tiles}) goes to stage s = g mod {stages} on pass "
        f"k = g // {stages} over the ring, where full[s] and empty[s] complete their phase k, of parity k mod 2.",
        "The consumers wait on full[s] with parity phase = k mod 2; the producer on empty[s] with parity phase ^ 1, "
        "that of pass k − 1's releases (pass 0: at once).",
    ]
    fig.text(0.5, 0.942, "\n".join(header), ha="center", va="top", fontsize=9.5, linespacing=1.4)
    legend = [
        (plt.Line2D([], [], marker="v", color="black", ls="none", ms=5),
         "thread 0 issues slice g's copies (its wait on empty[s] returned)"),
        (Rectangle((0, 0), 1, 1, facecolor=tile_colours[0], edgecolor="0.25", hatch="////", alpha=0.55),
         f"copy in flight: full[s] waits for its {shape['stage_bytes'] // 1024} KB"),
        (Rectangle((0, 0), 1, 1, facecolor=tile_colours[0], edgecolor="0.25"),
         "slice g in stage s (colour: its tile), until both releases"),
        (plt.Line2D([], [], color=consumer_colours[0], lw=2),
         "consumer 1 releases slice g, 4 arrivals on empty[s] (after wgmma_wait<1>)"),
        (plt.Line2D([], [], color=consumer_colours[1], lw=2),
         "consumer 2 releases it (after wgmma_wait<0> for a tile's last slice)"),
        (plt.Line2D([], [], color=consumer_colours[0], lw=1, ls=(0, (2, 2))),
         "group committed, waiting for the tensor cores"),
        (plt.Line2D([], [], color="crimson", lw=2.2), "consumer waits on full[s]: its slice has not landed"),
        (Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="crimson", hatch="xx"), "tensor cores idle"),
    ]
    fig.legend([h for h, _ in legend], [t for _, t in legend], loc="lower center", ncol=2, fontsize=8.5,
               frameon=False, bbox_to_anchor=(0.5, 0.025), handlelength=2.2, columnspacing=2.0)
    fig.text(0.5, 0.008, "One unit of one block is simulated; the phases run on across units. Clusters of two "
             "blocks (kPairs) are left out: there a stage is empty once the consumers of both blocks released it.",
             ha="center", va="bottom", fontsize=8, color="0.35")
    figure_cli.save_png(plt, fig, args.out)


def parse(argv):
    parser = Parser(description="The wgmma pipeline's ring of stages, simulated and drawn (no GPU).")
    parser.add_argument("--out", default="docs/figures/pipeline_timeline.png", help="the PNG to write")
    parser.add_argument("--copy", type=float, default=2.0, help="a slice's two copies, in time units (default 2)")
    parser.add_argument("--wgmma", type=float, default=2.0,
                        help="one consumer's group of wgmmas on a slice (default 2)")
    parser.add_argument("--epilogue", type=float, default=6.0, help="one consumer's epilogue of a tile (default 6)")
    parser.add_argument("--k-tiles", type=int, default=6, help="k-slices per tile (default 6)")
    parser.add_argument("--tiles", type=int, default=3, help="tiles of the unit (default 3)")
    args = parser.parse_args(argv)
    for name in ("copy", "wgmma", "epilogue"):
        value = getattr(args, name)
        if not 0 < value <= 100:
            fail(f"--{name} {value:g}: expected a duration in (0, 100]")
    if not 1 <= args.k_tiles <= 12:
        fail(f"--k-tiles {args.k_tiles}: expected 1..12 (a readable timeline)")
    if not 1 <= args.tiles <= 4:
        fail(f"--tiles {args.tiles}: expected 1..4")
    return args


def main(argv):
    args = parse(argv)
    figure_cli.require_plotting(PROG, numpy=False)
    shape = read_shape()
    log = simulate(shape, args.copy, args.wgmma, args.epilogue, args.k_tiles, args.tiles)
    claims = check(log, shape, args.k_tiles, args.tiles)
    if not log["stuck"]:
        draw(log, shape, args)
        busy = sum(g["end"] - g["start"] for g in log["groups"])
        print(f"{args.out}: {args.tiles} tiles x {args.k_tiles} slices through {shape['kStages']} stages in "
              f"{log['end']:g} time units, tensor cores busy {100 * busy / log['end']:.0f}%, at most "
              f"{max_resident(log, shape)} slices resident")
    return figure_cli.verdict(PROG, claims)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
