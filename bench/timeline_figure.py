#!/usr/bin/env python3
"""Where a sparse call of the final stage spends its GPU time, as a figure: bench/stage_timeline.py's reports
(committed under docs/profiles/) summed into the steps of the plan, one stacked bar per shape.

    /usr/bin/python3 bench/timeline_figure.py REPORT[:SHAPE] [REPORT[:SHAPE] ...] --out PNG

Each REPORT is a file that stage_timeline.py wrote; SHAPE picks one of its shapes (default: every shape in it).
A bar adds the time of the operations of one traced call, step by step, then the idle time between them, and
is as long as the call's span, printed at its end: dE's products run on a side stream beside dC's, and time that
two operations share counts once, for the one that started first. Exit status 2 for bad arguments or a file that
is not such a report, 1 without matplotlib."""
import argparse
import collections
import os
import re
import sys

# The plan's steps, in the order they run, and the kernel families (stage_timeline.kernel_family) of each; a
# family in none of them counts as "other".
STEPS = (
    ("forward: logits' tile statistics", ("cce::wgmma_pipeline_kernel",)),
    ("vocabulary order: sort key, sorted C",
     ("cce::s08::sort_key_kernel", "cce::s08::gather_rows_kernel", "cce::s08::rank_kernel",
      "cce::s08::target_position_kernel", "cce::s08::valid_row_partial_sums_kernel", "cce::s08::sum_partials_kernel")),
    ("decision: token blocks, eps, kept pairs",
     ("cce::s10::token_key_kernel", "cce::s10::token_count_kernel", "cce::s10::token_place_kernel",
      "cce::s10::misplaced_mass_kernel", "cce::s10::dropped_mass_kernel",  # its name in the committed timelines
      "cce::s10::keep_at_exponent_kernel", "cce::s08::decide_kernel",
      "cce::s08::tail_mass_kernel", "cce::s09::fill_block_lists_kernel", "cce::s09::slot_offsets_kernel",
      "cce::s09::fill_slots_kernel",
      "cce::s09::target_key_kernel", "cce::s09::tile_target_offsets_kernel",
      "cce::s08::target_coefficient_kernel")),
    ("kept tiles: recompute, dE and dC products",
     ("cce::s09::recompute_kept_kernel", "cce::s09::de_products_bf16", "cce::s09::dc_products_bf16")),
    ("dC rows of unkept tiles", ("cce::s09::dc_unkept_rows",)),
    ("tail correction: cuBLAS GEMMs", ("nvjet", "cutlass", "sm90_xmma")),  # prefixes
)
OTHER, IDLE = "other (sorts, merges, memsets, copies, dE's finish)", "idle between operations"
LINE = re.compile(r"^\+\s*(\d+) idle\s+([\d.]+) dur\s+([\d.]+)\s+(.*)$")
TITLE = re.compile(r"^== (\S+): N=(\d+) D=(\d+) V=(\d+)")
SPAN = re.compile(r"^span (\d+) us")


def step_of(family):
    for name, families in STEPS:
        if any(family == f or (not f.startswith("cce::") and family.startswith(f)) for f in families):
            return name
    return OTHER


def parse_reports(text):
    """{shape: {"dims": (N, D, V), "span_us": float, "ops": [(start, idle, dur, name)]}} from a report's text."""
    shapes, current = collections.OrderedDict(), None
    for line in text.splitlines():
        m = TITLE.match(line)
        if m:
            current = shapes[m.group(1)] = {"dims": tuple(int(m.group(k)) for k in (2, 3, 4)), "span_us": None,
                                            "ops": []}
            continue
        if current is None:
            continue
        m = LINE.match(line)
        if m:
            current["ops"].append((float(m.group(1)), float(m.group(2)), float(m.group(3)), m.group(4)))
            continue
        m = SPAN.match(line)
        if m:
            current["span_us"] = float(m.group(1))
    return shapes


def steps_us(ops):
    """The operations' time summed per step (STEPS, then other), then the idle time, in µs. An operation counts
    only the part of it after every earlier one has ended (the report's starts are whole µs)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from stage_timeline import kernel_family
    out = collections.OrderedDict((name, 0.0) for name, _ in STEPS)
    out[OTHER] = 0.0
    out[IDLE] = 0.0
    end = None
    for start, idle, dur, name in ops:
        own = dur if end is None else max(0.0, start + dur - max(start, end))
        end = start + dur if end is None else max(end, start + dur)
        out[step_of(kernel_family(name))] += own
        out[IDLE] += idle
    return out


def trace_tag(path):
    """A report's name without the common part: stage10_timelines_h100_after_decision.txt -> after_decision."""
    name = os.path.splitext(os.path.basename(path))[0]
    return name[len("stage10_timelines_"):] if name.startswith("stage10_timelines_") else name


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("reports", nargs="+", help="REPORT[:SHAPE]: a stage_timeline.py report and one of its shapes")
    ap.add_argument("--out", required=True, help="the PNG to write")
    a = ap.parse_args(argv)
    bars = []
    for spec in a.reports:
        path, _, shape = spec.partition(":")
        try:
            with open(path) as f:
                shapes = parse_reports(f.read())
        except OSError as exc:
            ap.error("cannot read %s: %s" % (path, exc.strerror))
        if not shapes:
            ap.error("%s holds no stage_timeline.py report" % path)
        if shape and shape not in shapes:
            ap.error("%s has no shape %s (it has %s)" % (path, shape, ", ".join(shapes)))
        for name in ([shape] if shape else list(shapes)):
            if not shapes[name]["ops"] or shapes[name]["span_us"] is None:
                ap.error("%s: shape %s has no operations or no span line" % (path, name))
            bars.append((name, path, shapes[name]))
    return a, bars


def main(argv=None):
    a, bars = parse(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("timeline_figure.py: error: needs matplotlib (python3-matplotlib; run with /usr/bin/python3)",
              file=sys.stderr)
        return 1
    plt.rcParams.update({"font.size": 9})
    fig, ax = plt.subplots(figsize=(9.5, 1.0 + 0.75 * len(bars)))
    colors = plt.get_cmap("tab10").colors
    labels = [name for name, _ in STEPS] + [OTHER, IDLE]
    for row, (shape, path, data) in enumerate(reversed(bars)):
        left = 0.0
        for k, (step, us) in enumerate(steps_us(data["ops"]).items()):
            ms = us / 1000.0
            ax.barh(row, ms, left=left, color=colors[k % len(colors)] if step != IDLE else "0.85",
                    edgecolor="white", linewidth=0.5, label=step if row == 0 else None)
            if ms >= 0.6:
                ax.text(left + ms / 2, row, "%.1f" % ms, ha="center", va="center", fontsize=7)
            left += ms
        ax.text(left + 0.15, row, "call %.1f ms" % (data["span_us"] / 1000.0), va="center", fontsize=8)
    names = ["%s (%s)\nN=%d D=%d V=%d" % ((shape, trace_tag(path)) + data["dims"]) for shape, path, data in reversed(bars)]
    ax.set_yticks(range(len(bars)), names)
    ax.set_xlabel("GPU time of one loss + gradient call, ms (one trace each, torch.profiler)")
    ax.set_xlim(0, max(sum(steps_us(d["ops"]).values()) for _, _, d in bars) / 1000.0 * 1.15)
    handles, texts = ax.get_legend_handles_labels()
    order = [texts.index(t) for t in labels if t in texts]
    ax.legend([handles[i] for i in order], [texts[i] for i in order], loc="upper center",
              bbox_to_anchor=(0.5, -0.22 if len(bars) > 2 else -0.45), ncol=2, fontsize=8, frameon=False)
    folders = sorted({os.path.dirname(os.path.relpath(p)) for _, p, _ in bars})
    files = sorted({os.path.basename(p) for _, p, _ in bars})
    where = ("in %s/: %s" % (folders[0], ", ".join(files)) if len(folders) == 1
             else ", ".join(sorted({os.path.relpath(p) for _, p, _ in bars})))
    ax.set_title("Stage 10, sparse plan: where one call's GPU time goes (traces %s)" % where, fontsize=8)
    fig.savefig(a.out, dpi=130, bbox_inches="tight")
    print("wrote %s (%d kB)" % (a.out, os.path.getsize(a.out) // 1024))
    return 0


if __name__ == "__main__":
    sys.exit(main())
