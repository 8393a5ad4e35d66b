#!/usr/bin/env python3
"""The figures of docs/results.md, as PNG files, from the committed JSON files (matplotlib, Agg backend).

    /usr/bin/python3 bench/figures.py                     # writes docs/figures/*.png
    /usr/bin/python3 bench/figures.py --out /tmp/figures  # somewhere else

Reads the benchmark files that docs/results.md's tables are made from (bench/results_table.py's FILES, in
docs/), taking one value per case by the same rule as the tables (the newest run), and stage 10's
threshold sweeps (docs/drop_eps_sweep*.json). Writes:

  time_memory.png     loss+grad time and peak memory of every implementation with a backward (the cuBLAS
                      floor, the stages, the peers) at gemma2 and lm32k
  gradient_error.png  dE and dC relative L2 error of each stage with a backward, eager PyTorch's as lines,
                      at gemma2, gemma2_flat, lm32k and lm128k
  eps_sweep.png       stage 10: the share of tiles kept and the dE and dC errors against the threshold eps,
                      with and without the tail correction, one column per shape of the sweeps; the star
                      and eager PyTorch's lines from the run the sweeps were made beside (SWEEP_BENCH)
  h200_time_memory.png  the sweep on another GPU (results_table.py's APART_BLOCKS: the H200's), one row per
                      shape it ran: loss+grad time of each implementation divided by the cuBLAS floor's time in
                      the same tables (left, with the final stage's and the fastest peer's times written out) and
                      peak memory (right)
  h200_training_sweep.png  the same on the H200 (its block's files), with the implementations its one run in
                      turns timed at every snapshot (H200_SWEEP_IMPLS: QuACK in place of CCE and Liger)
  h100_3ae9c50_time_memory.png, h100_3ae9c50_training_sweep.png  the same for the H100's run shown apart
                      (APART_BLOCKS' h100_3ae9c50_summary: every shape at one tree, CCE and Liger among the peers)
  training_sweep.png  lm128k during its training (the shapes lm128k_s0 ... lm128k_s300, then lm128k): loss+grad
                      time of stage 10, the cuBLAS floor and each peer against the training step (top), and
                      stage 10's kept share of the pairs, its eps and its plan (bottom); the steps and held-out
                      losses from docs/lm_data/lm128k*.json. The plan is not a counter of the files: dense
                      where more than a third of the pairs are kept (kDenseAboveKept, plan_per_batch.h)

Needs matplotlib (python3-matplotlib: /usr/bin/python3 has it where scripts/install-deps.sh ran). Exit status 1,
with a one-line message, when a JSON file it needs is missing or malformed, or matplotlib is missing.
"""

import argparse
import glob
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import figure_cli  # noqa: E402  (one way to write a PNG)
import results_table as rt  # noqa: E402  (the loader and the one-value rule of the tables)

TIME_SHAPES = ("gemma2", "lm32k")              # figure 1
# The benchmark run the sweeps were made beside (the same session, the same lm32k model): figure 3's star and
# eager lines come from these files, not from the tables' newest run (its lm32k model is another one).
SWEEP_BENCH = ("bench_peers_stage08.json", "bench_peers_stage08_lm32k.json", "bench_stage08.json",
               "bench_stage08_lm32k.json")
ERROR_SHAPES = ("gemma2", "gemma2_flat", "lm32k", "lm128k")  # figure 2: those present
SWEEP_MODEL = "lm128k"                         # figure 4: its training snapshots lm128k_sK, then the final model
SWEEP_IMPLS = ("cublas_floor", "stage10_plan_per_batch", "peer_torch_compile", "peer_torch_eager", "peer_cce",
               "peer_liger")
# The H200's sweep (h200_training_sweep.png): the implementations its one run in turns timed at every snapshot.
H200_SWEEP_IMPLS = ("cublas_floor", "stage10_plan_per_batch", "peer_torch_compile", "peer_torch_eager", "peer_quack")
DENSE_ABOVE_KEPT = 1.0 / 3.0                   # kDenseAboveKept in stages/10_plan_per_batch/plan_per_batch.h
PEER_LABELS = {"peer_torch_eager": "PyTorch eager", "peer_torch_compile": "torch.compile",
               "peer_cce": "Cut Cross-Entropy", "peer_cce_nofilter": "CCE, no filter",
               "peer_cce_exact": "CCE, exact", "peer_liger": "Liger-Kernel", "peer_quack": "QuACK"}
EAGER = "peer_torch_eager"
COLORS = {"floor": "0.45", "stage": "C0", "peer": "C1", "dE": "C3", "dC": "C9"}
DPI = 100


class Fault(Exception):
    """Reported in one line, exit status 1."""


def label(impl):
    if impl == "cublas_floor":
        return "cuBLAS floor"
    number = rt.stage_number(impl)
    if number is not None:
        name = impl.split("_", 1)[1] if "_" in impl else ""
        return f"stage {number:02d} {name.replace('_', ' ')}".strip()
    return PEER_LABELS.get(impl, impl)


def kind(impl):
    return "floor" if impl == "cublas_floor" else "stage" if rt.stage_number(impl) is not None else "peer"


def load_bench(paths):
    """(the selected {key: values dict}, {shape: (N, D, V)}, the GPU names, {key: (min ms, max ms)} where the file
    keeps the fastest and slowest repetition) of the benchmark files."""
    loaded = []
    for path in paths:
        try:
            context, results = rt.load(path)
        except rt.InputFault as e:
            raise Fault(str(e))
        loaded.append((path, context, results))
    merged = rt.select(loaded)
    dims = dict(rt.SHAPES)
    dims.update(rt.context_dims([(p, c) for p, c, _ in loaded]))
    gpus = {}
    for path, context, _ in loaded:
        gpus[path] = context.get("gpu_name") or context.get("gpu") or "GPU not recorded"
    values = {key: r.values() for key, r in merged.items() if r.values()}
    spreads = {key: r.spread() for key, r in merged.items() if r.values() and r.spread()}
    return values, dims, {gpus[r.source] for r in merged.values()}, spreads


def load_sweeps(paths):
    """({shape: {"dims": (n, d, v), "rows": [...]}}, GPU names) of drop_eps_sweep JSON files."""
    shapes, gpus = {}, set()
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except OSError as e:
            raise Fault(f"cannot read {path}: {e.strerror or e}")
        except json.JSONDecodeError as e:
            raise Fault(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})")
        if not isinstance(data, dict) or not isinstance(data.get("shapes"), list):
            raise Fault(f"{path}: not a drop_eps_sweep file (no \"shapes\" list)")
        gpus.add((data.get("context") or {}).get("gpu", "GPU not recorded"))
        for shape in data["shapes"]:
            try:
                rows = [r for r in shape["rows"] if not r.get("automatic")]
                for r in rows:
                    float(r["eps_exponent"]), float(r["kept_frac"]), float(r["dE_rel_err"]), float(r["dC_rel_err"])
                    str(r["correction"])
                shapes[shape["name"]] = {"dims": (shape["n"], shape["d"], shape["v"]), "rows": rows}
            except (KeyError, TypeError, ValueError) as e:
                raise Fault(f"{path}: a shape or row without name, n, d, v, eps_exponent, correction, kept_frac, "
                            f"dE_rel_err or dC_rel_err ({e!r})")
    return shapes, gpus


def gpu_words(gpus):
    gpus = sorted(gpus)
    return ("one " + gpus[0]) if len(gpus) == 1 else "GPUs " + ", ".join(gpus)


def shape_title(shape, dims):
    size = f"N={dims[0]}, D={dims[1]}, V={dims[2]}" if dims else "size not recorded"
    words = rt.data_words(shape).replace("a trained model's data", "trained-model data")
    return f"{shape} ({size}, {words})"


def save(plt, fig, out, name):
    """The figure as an RGB PNG (figure_cli.save_png: no alpha channel, no version stamp), closed; its path."""
    path = os.path.join(out, name)
    figure_cli.save_png(plt, fig, path, dpi=DPI, colors="rgb")
    return path


def fmt_value(x):
    return f"{x:.3g}" if x < 1000 else f"{x:.0f}"


def log_ticks(axis, lo, hi, fmt=lambda t: f"{t:g}"):
    """Readable ticks on a log axis (ax.xaxis or ax.yaxis) from lo to hi: 1, 2 and 5 times the powers of ten
    (every integer multiple when that gives fewer than three), written out by fmt."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    ticks = []
    for multiples in ((1, 2, 5), range(1, 10)):
        ticks, p = [], 10.0 ** math.floor(math.log10(lo))
        while p <= hi:
            ticks += [m * p for m in multiples if lo <= m * p <= hi]
            p *= 10
        if len(ticks) >= 3:
            break
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda t, _: fmt(t)))


def fmt_err(t):
    return f"{t:.0e}".replace("e-0", "e-") if t < 1e-3 else f"{t:g}"


def figure_time_memory(plt, values, dims, gpus, out, shapes=TIME_SHAPES, name="time_memory.png",
                       note=" (stages 03–05 have no backward)"):
    for shape in shapes:
        if not any(k[2] == shape and k[1] == "loss_grad" for k in values):
            raise Fault(f"no loss_grad case at {shape} in the benchmark files (figure {name} needs it)")
    impls = {s: sorted({i for (i, m, sh) in values if sh == s and m == "loss_grad"}, key=rt.impl_order)
             for s in shapes}
    rows = max(len(v) for v in impls.values())
    bar_rows = rows * len(shapes)  # 0.34 in a bar, less where that would pass 18.1 in (the figures' test: ≤ 2000 px)
    fig, axes = plt.subplots(len(shapes), 2, figsize=(12, 1.3 + min(0.34, 16.8 / bar_rows) * bar_rows), squeeze=False)
    for (ax_t, ax_m), shape in zip(axes, shapes):
        names = impls[shape][::-1]  # the floor at the top
        y = range(len(names))
        for ax, metric, fmt in ((ax_t, "ms", rt.fmt_ms), (ax_m, "peak_MB", rt.fmt_mb)):
            xs = [values[(i, "loss_grad", shape)].get(metric) for i in names]
            ax.barh(y, [x or 0 for x in xs], color=[COLORS[kind(i)] for i in names], height=0.7)
            for yi, x in zip(y, xs):
                if x:
                    ax.text(x, yi, " " + fmt(x), va="center", fontsize=8,
                            bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.3, "alpha": 0.8})
            ax.set_yticks(list(y), [label(i) for i in names], fontsize=9)
            ax.set_ylim(-0.6, len(names) - 0.4)
            ax.grid(axis="x", alpha=0.3)
            ax.set_axisbelow(True)
            floor = values.get(("cublas_floor", "loss_grad", shape), {}).get(metric)
            if floor:
                ax.axvline(floor, color=COLORS["floor"], ls="--", lw=1)
        ax_t.set_xlim(0, 1.15 * max(values[(i, "loss_grad", shape)]["ms"] for i in names))
        ax_t.set_xlabel("loss + gradient time, ms (median of the repetitions)")
        mbs = [values[(i, "loss_grad", shape)]["peak_MB"] for i in names
               if values[(i, "loss_grad", shape)].get("peak_MB")]
        ax_m.set_xscale("log")
        ax_m.set_xlim(min(mbs) / 1.5, max(mbs) * 2.5)
        log_ticks(ax_m.xaxis, min(mbs) / 1.5, max(mbs) * 2.5)
        ax_m.set_xlabel("peak device memory beyond the inputs, MB (log scale)")
        ax_t.set_title(f"{shape_title(shape, dims.get(shape))}: time", fontsize=10, loc="left")
        ax_m.set_title("peak memory", fontsize=10, loc="left")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS[k]) for k in ("floor", "stage", "peer")]
    handles.append(plt.Line2D([], [], color=COLORS["floor"], ls="--", lw=1))
    fig.legend(handles, ["cuBLAS floor (the GEMMs alone)", "stages of this course", "peers (libraries)",
                         "the floor's value"], loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(f"Loss + gradient in bf16 on {gpu_words(gpus)}{note}", fontsize=11)
    fig.tight_layout(rect=(0, 0.035 * 2 / len(shapes), 1, 1 - 0.03 * 2 / len(shapes)))
    path = save(plt, fig, out, name)
    return path


# The other GPU's sweep: a marker per implementation (the final stage filled, its op hollow, an earlier stage a
# hexagon, each peer its own).
MARKERS = {"stage": ("o", "C0", True), "stage_op": ("o", "C0", False), "earlier_stage": ("h", "C9", True),
           "peer_torch_compile": ("s", "C1", True),
           "peer_quack": ("D", "C2", True), "peer_cce": ("^", "C4", True), "peer_cce_nofilter": ("^", "C4", False),
           "peer_liger": ("v", "C5", True), "peer_torch_eager": ("X", "C7", True)}


def marker_key(impl, final_stage):
    if impl.startswith("stage"):
        if rt.is_stage_op(impl):
            return "stage_op"
        return "stage" if impl == final_stage else "earlier_stage"
    return impl


def figure_ratio_to_floor(plt, values, gpus, out, shapes, name):
    """One row per shape: each implementation's loss + grad time over the floor's (left, log scale) and its peak
    memory (right, log scale); the final stage's time and the fastest peer's written beside the rows."""
    loss_grad = {s: {i: v for (i, m, sh), v in values.items() if sh == s and m == "loss_grad" and v.get("ms")}
                 for s in shapes}
    for shape in shapes:
        if "cublas_floor" not in loss_grad[shape]:
            raise Fault(f"no cublas_floor loss_grad case at {shape} in the benchmark files (figure {name} needs it)")
    impls = sorted({i for cases in loss_grad.values() for i in cases if i != "cublas_floor"}, key=rt.impl_order)
    final_stage = max((i for i in impls if i.startswith("stage") and not rt.is_stage_op(i)), key=rt.impl_order)
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(13, 1.6 + 0.42 * len(shapes)),
                                     gridspec_kw={"width_ratios": (1.45, 1)})
    rows = {shape: len(shapes) - 1 - k for k, shape in enumerate(shapes)}  # the first shape at the top
    for impl in impls:
        marker, color, filled = MARKERS.get(marker_key(impl, final_stage), ("P", "C8", True))
        style = {"marker": marker, "s": 46, "linewidths": 1.3, "zorder": 3, "label": label(impl),
                 "facecolors": color if filled else "none", "edgecolors": color}
        at = [s for s in shapes if impl in loss_grad[s]]
        ax_t.scatter([loss_grad[s][impl]["ms"] / loss_grad[s]["cublas_floor"]["ms"] for s in at],
                     [rows[s] for s in at], **style)
        with_mb = [s for s in at if loss_grad[s][impl].get("peak_MB")]
        ax_m.scatter([loss_grad[s][impl]["peak_MB"] for s in with_mb], [rows[s] for s in with_mb], **style)
    floor_mb = [loss_grad[s]["cublas_floor"].get("peak_MB") for s in shapes]
    ax_m.scatter([m for m in floor_mb if m], [rows[s] for s, m in zip(shapes, floor_mb) if m], marker="|", s=160,
                 color=COLORS["floor"], zorder=2, label="cuBLAS floor")
    ax_t.axvline(1.0, color=COLORS["floor"], ls="--", lw=1, label="cuBLAS floor (time = 1; memory: the bar)")
    ratios = [v["ms"] / loss_grad[s]["cublas_floor"]["ms"] for s in shapes for v in loss_grad[s].values()]
    lo, hi = min(ratios) / 1.25, max(ratios) * 1.25
    ax_t.set_xscale("log")
    ax_t.set_xlim(lo, hi * 2.3)  # room on the right for the written times
    log_ticks(ax_t.xaxis, lo, hi, lambda t: f"{t:g}×")
    for shape in shapes:
        stage = loss_grad[shape].get(final_stage)
        peers = [(v["ms"], i) for i, v in loss_grad[shape].items() if i.startswith("peer_")]
        text = f"{rt.fmt_ms(stage['ms'])} ms" if stage else "–"
        if peers:
            best_ms, best = min(peers)
            text += f" | {label(best)} {rt.fmt_ms(best_ms)}"
        ax_t.text(hi * 1.08, rows[shape], text, va="center", fontsize=8)
    mbs = [v["peak_MB"] for s in shapes for v in loss_grad[s].values() if v.get("peak_MB")]
    ax_m.set_xscale("log")
    ax_m.set_xlim(min(mbs) / 1.5, max(mbs) * 1.5)
    log_ticks(ax_m.xaxis, min(mbs) / 1.5, max(mbs) * 1.5)
    for ax in (ax_t, ax_m):
        ax.set_yticks([rows[s] for s in shapes], shapes if ax is ax_t else [""] * len(shapes), fontsize=9)
        ax.set_ylim(-0.6, len(shapes) - 0.4)
        ax.grid(axis="x", alpha=0.3)
        ax.set_axisbelow(True)
    ax_t.set_xlabel("loss + gradient time ÷ the cuBLAS floor's (log scale; right: "
                    f"{label(final_stage)}'s median | the fastest peer's)")
    ax_m.set_xlabel("peak device memory beyond the inputs, MB (log scale)")
    handles, labels = ax_t.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(5, len(labels)), fontsize=9, frameon=False)
    fig.suptitle(f"Loss + gradient in bf16 on {gpu_words(gpus)}: every shape of the sweep", fontsize=11)
    fig.tight_layout(rect=(0, 0.03 + 0.5 / len(shapes), 1, 0.97))
    return save(plt, fig, out, name)


def figure_gradient_error(plt, values, dims, gpus, out):
    shapes = [s for s in ERROR_SHAPES if any(k[2] == s for k in values)]
    if not shapes:
        raise Fault("no case at " + ", ".join(ERROR_SHAPES) + " in the benchmark files (gradient_error.png needs one)")
    stages = sorted({i for (i, m, s) in values if m == "loss_grad" and s in shapes and kind(i) == "stage"
                     and "dE_rel_err" in values[(i, m, s)]}, key=rt.impl_order)
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.3 * len(shapes), 4.6), squeeze=False, sharey=True)
    width = 0.38
    seen = [v[f"{m}_rel_err"] for (i, mode, s), v in values.items() if mode == "loss_grad" and s in shapes
            and (i in stages or i == EAGER) for m in ("dE", "dC") if f"{m}_rel_err" in v]
    lo, hi = min(seen) / 1.6, max(seen) * 1.6
    for ax, shape in zip(axes[0], shapes):
        for k, stage in enumerate(stages):
            v = values.get((stage, "loss_grad", shape))
            if v is None:
                ax.text(k, lo * 1.15, "not\nrun", ha="center", va="bottom", fontsize=8, color="0.3")
                continue
            for off, metric in ((-width / 2, "dE"), (width / 2, "dC")):
                ax.bar(k + off, v[f"{metric}_rel_err"], width, color=COLORS[metric])
        eager = values.get((EAGER, "loss_grad", shape))
        if eager:
            ax.axhline(eager["dE_rel_err"], color=COLORS["dE"], lw=1.2, ls="-")
            ax.axhline(eager["dC_rel_err"], color=COLORS["dC"], lw=1.2, ls="--")
        ax.set_yscale("log")
        ax.set_ylim(lo, hi)
        log_ticks(ax.yaxis, lo, hi, fmt_err)
        ax.set_xlim(-0.6, len(stages) - 0.4)
        ax.set_xticks(range(len(stages)), [f"{rt.stage_number(s):02d}" for s in stages])
        ax.set_xlabel("stage (those with a backward)")
        ax.set_title(shape_title(shape, dims.get(shape)), fontsize=9)
        ax.grid(axis="y", which="both", alpha=0.25)
        ax.set_axisbelow(True)
    axes[0][0].set_ylabel("relative L2 error against fp32 (log scale)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLORS["dE"]), plt.Rectangle((0, 0), 1, 1, color=COLORS["dC"]),
               plt.Line2D([], [], color=COLORS["dE"], lw=1.2), plt.Line2D([], [], color=COLORS["dC"], lw=1.2, ls="--")]
    fig.legend(handles, ["dE, stage", "dC, stage", "dE, PyTorch eager", "dC, PyTorch eager"], loc="lower center",
               ncol=4, fontsize=9, frameon=False)
    fig.suptitle(f"Gradient error of each stage against eager PyTorch's, bf16, on {gpu_words(gpus)}", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    path = save(plt, fig, out, "gradient_error.png")
    return path


def figure_eps_sweep(plt, sweeps, sweep_gpus, values, out):
    shapes = sorted(sweeps, key=rt.shape_order)
    if not shapes:
        raise Fault("the drop_eps_sweep files hold no shape")
    # The benchmark's run of the swept stage (stage 10; another stage with an automatic eps only without it).
    stage08 = {}
    for (impl, mode, shape), v in sorted(values.items(), key=lambda kv: (not kv[0][0].startswith("stage10"),
                                                                          rt.impl_order(kv[0][0]))):
        if mode == "loss_grad" and shape in sweeps and "drop_eps_log2" in v:
            stage08.setdefault(shape, (impl, v))
    fig, axes = plt.subplots(2, len(shapes), figsize=(3.4 * len(shapes), 7.4), squeeze=False, sharex="col")
    for col, shape in enumerate(shapes):
        rows = sweeps[shape]["rows"]
        ax_k, ax_e = axes[0][col], axes[1][col]
        exps = sorted({r["eps_exponent"] for r in rows if r["eps_exponent"] > 0}, reverse=True)
        kept = {r["eps_exponent"]: r["kept_frac"] for r in rows if r["eps_exponent"] > 0}
        ax_k.plot([-e for e in exps], [100 * kept[e] for e in exps], "k-o", ms=4)
        for correction, ls, what in (("dE+dC", "-", "corrected"), ("none", ":", "not corrected")):
            sel = sorted((r for r in rows if r["correction"] == correction and r["eps_exponent"] > 0),
                         key=lambda r: -r["eps_exponent"])
            for metric, marker in (("dE", "o"), ("dC", "s")):
                ax_e.plot([-r["eps_exponent"] for r in sel], [r[f"{metric}_rel_err"] for r in sel], ls=ls,
                          marker=marker, ms=4, color=COLORS[metric], label=f"{metric}, {what}")
        eager = values.get((EAGER, "loss_grad", shape))
        if eager:
            ax_e.axhline(eager["dE_rel_err"], color=COLORS["dE"], lw=0.9, alpha=0.7, label="dE, PyTorch eager")
            ax_e.axhline(eager["dC_rel_err"], color=COLORS["dC"], lw=0.9, alpha=0.7, ls="--",
                         label="dC, PyTorch eager")
        impl, bench = stage08.get(shape, (None, None))
        if bench:
            x = bench["drop_eps_log2"]
            ax_k.plot([x], [100 * bench["kept_frac"]], marker="*", ms=14, color="gold", mec="black", ls="none")
            ax_e.plot([x, x], [bench["dE_rel_err"], bench["dC_rel_err"]], marker="*", ms=14, ls="none",
                      color="gold", mec="black",
                      label=f"stage {rt.stage_number(impl):02d} in the benchmark (its automatic eps)")
        ax_k.set_yscale("log")
        lo, hi = ax_k.get_ylim()
        log_ticks(ax_k.yaxis, lo, hi, lambda t: f"{t:g}%")
        ax_e.set_yscale("log")
        lo, hi = ax_e.get_ylim()
        log_ticks(ax_e.yaxis, lo, hi, fmt_err)
        ax_e.set_xticks([-e for e in exps], [f"$2^{{-{e:g}}}$" for e in exps])
        ax_e.set_xlabel("eps, the softmax threshold (larger to the right)")
        n, d, v = sweeps[shape]["dims"]
        ax_k.set_title(f"{shape}, {'trained-model' if rt.is_trained(shape) else 'generated'} data\n"
                       f"N={n}, D={d}, V={v}", fontsize=9)
        for ax in (ax_k, ax_e):
            ax.grid(which="both", alpha=0.25)
            ax.tick_params(axis="both", labelsize=8)
    axes[0][0].set_ylabel("backward tiles kept, % (log scale)")
    axes[1][0].set_ylabel("relative L2 error against fp32 (log scale)")
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.suptitle(f"Stage 10: tiles kept and gradient error against the threshold eps, on {gpu_words(sweep_gpus)}",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    path = save(plt, fig, out, "eps_sweep.png")
    return path


def load_training_steps(model):
    """[(shape, step, held-out loss)] of the model's snapshots and the final model, in training order, from
    docs/lm_data/<shape>.json (training.step; heldout_loss_model.loss)."""
    out = []
    for shape in [s for s in rt.LM_SHAPES if (rt.snapshot_of(s) or (None,))[0] == model] + [model]:
        path = os.path.join(rt.ROOT, "docs", "lm_data", shape + ".json")
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            out.append((shape, int(data["training"]["step"]), float(data["heldout_loss_model"]["loss"])))
        except OSError as e:
            raise Fault(f"cannot read {path}: {e.strerror or e}")
        except (ValueError, KeyError, TypeError) as e:
            raise Fault(f"{path}: no training.step or heldout_loss_model.loss ({e!r})")
    return out


def figure_training_sweep(plt, values, spreads, dims, gpus, steps, out, impls=SWEEP_IMPLS,
                          file_name="training_sweep.png"):
    shapes = [s for s, _, _ in steps]
    missing = [f"{i} at {s}" for s in shapes for i in impls if (i, "loss_grad", s) not in values]
    if missing:
        raise Fault(f"{file_name} needs loss_grad cases the benchmark files lack: " + ", ".join(missing))
    x = [step for _, step, _ in steps]
    fig, (ax_t, ax_k) = plt.subplots(2, 1, figsize=(10, 8.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    styles = {"cublas_floor": dict(color=COLORS["floor"], ls="--", marker="s"),
              "stage10_plan_per_batch": dict(color=COLORS["stage"], ls="-", marker="o", lw=2.4, ms=7),
              "peer_torch_compile": dict(color="C1", ls="-", marker="^"),
              "peer_torch_eager": dict(color="C3", ls=":", marker="v"),
              "peer_cce": dict(color="C2", ls="-.", marker="D"),
              "peer_liger": dict(color="C4", ls=":", marker="P"),
              "peer_quack": dict(color="C2", ls="-", marker="D")}
    for impl in impls:
        ys = [values[(impl, "loss_grad", s)]["ms"] for s in shapes]
        name = "cuBLAS floor (4 GEMMs)" if impl == "cublas_floor" else "stage 10" if kind(impl) == "stage" \
            else label(impl)
        ax_t.plot(x, ys, label=name, **{"lw": 1.5, "ms": 5, **styles[impl]})
        span = [spreads.get((impl, "loss_grad", s)) for s in shapes]
        if all(span):  # the fastest and slowest repetition, as whiskers
            ax_t.errorbar(x, ys, yerr=[[y - lo for y, (lo, _) in zip(ys, span)], [hi - y for y, (_, hi) in zip(ys, span)]],
                          fmt="none", ecolor=styles[impl]["color"], elinewidth=1, capsize=3)
        if impl == "stage10_plan_per_batch":
            floor = [values[("cublas_floor", "loss_grad", s)]["ms"] for s in shapes]
            for xi, yi, fi in zip(x, ys, floor):  # above the point where it is above the floor, else below
                ax_t.annotate(f"{yi:.1f} ms", (xi, yi), xytext=(0, 9 if yi > fi else -15), textcoords="offset points",
                              ha="center", fontsize=8, color=COLORS["stage"], fontweight="bold")
    ax_t.set_ylim(0, 1.32 * max(values[(i, "loss_grad", s)]["ms"] for i in impls for s in shapes))  # room for the legend
    ax_t.set_ylabel("loss + gradient time, ms\n(median; whiskers: fastest and slowest repetition)")
    ax_t.grid(alpha=0.3)
    ax_t.legend(loc="upper center", ncol=3, fontsize=9, framealpha=0.9)
    kept = [values[("stage10_plan_per_batch", "loss_grad", s)] for s in shapes]
    for xi, v in zip(x, kept):
        dense = v["kept_frac"] > DENSE_ABOVE_KEPT
        ax_k.bar(xi, 100 * v["kept_frac"], width=0.16 * max(xi, 30), color="C3" if dense else COLORS["stage"],
                 alpha=0.85)
        eps = "$2^{%s}$" % rt.fmt_eps(v["drop_eps_log2"])[2:] if "drop_eps_log2" in v else ""
        ax_k.annotate(f"dense plan\n{100 * v['kept_frac']:.0f}% kept, eps {eps}" if dense else
                      f"sparse: {100 * v['kept_frac']:.1f}%, eps {eps}",
                      (xi, 100 * v["kept_frac"]), xytext=(0, 4), textcoords="offset points", ha="center",
                      va="bottom", fontsize=8)
    ax_k.axhline(100 * DENSE_ABOVE_KEPT, color="0.3", ls="--", lw=1)
    ax_k.text(math.sqrt(x[1] * x[2]), 100 * DENSE_ABOVE_KEPT + 2, "above a third kept: the dense plan",
              ha="center", va="bottom", fontsize=8, color="0.3")
    ax_k.set_ylim(0, 130)
    ax_k.set_yticks([0, 20, 40, 60, 80, 100])
    ax_k.set_ylabel("stage 10: pairs kept, %")
    ax_k.grid(axis="y", alpha=0.3)
    ax_k.set_xscale("symlog", linthresh=30, linscale=0.6)
    ax_k.set_xlim(-8, x[-1] * 1.35)
    ax_k.set_xticks(x, [f"{step}" + (" (final)" if s == SWEEP_MODEL else "") + f"\nheld-out loss {loss:.2f}"
                        for s, step, loss in steps], fontsize=8)
    ax_k.minorticks_off()
    ax_k.set_xlabel(f"training step of the {SWEEP_MODEL} model (symmetric log scale); its held-out loss, nats")
    size = dims.get(SWEEP_MODEL)
    size = f" (N={size[0]}, D={size[1]}, V={size[2]})" if size else ""
    fig.suptitle(f"Stage 10, the cuBLAS floor and the peers while the {SWEEP_MODEL} model trains{size}\n"
                 f"loss + gradient in bf16 on {gpu_words(gpus)}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    path = save(plt, fig, out, file_name)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description="The PNG figures of docs/results.md from the committed JSON files.")
    parser.add_argument("--bench", nargs="+", metavar="JSON",
                        help="benchmark files (default: bench/results_table.py's FILES in docs/)")
    parser.add_argument("--sweeps", nargs="+", metavar="JSON",
                        help="stage 10's threshold sweeps (default: docs/drop_eps_sweep*.json)")
    parser.add_argument("--out", default=os.path.join(rt.ROOT, "docs", "figures"),
                        help="folder (default: docs/figures)")
    args = parser.parse_args(argv)
    try:
        sweeps = args.sweeps or sorted(glob.glob(os.path.join(rt.ROOT, "docs", "drop_eps_sweep*.json")))
        if not sweeps:
            raise Fault(f"cannot read {os.path.join(rt.ROOT, 'docs', 'drop_eps_sweep*.json')}: no such file")
        values, dims, gpus, spreads = load_bench(args.bench or rt.default_paths())
        steps = load_training_steps(SWEEP_MODEL)
        sweep_values, _, _, _ = load_bench([os.path.join(rt.ROOT, "docs", name) for name in SWEEP_BENCH])
        sweep_data, sweep_gpus = load_sweeps(sweeps)
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            raise Fault("needs matplotlib (apt-get install python3-matplotlib; run with /usr/bin/python3)")
        plt.rcParams.update({"font.size": 9})
        os.makedirs(args.out, exist_ok=True)
        written = [figure_time_memory(plt, values, dims, gpus, args.out),
                   figure_gradient_error(plt, values, dims, gpus, args.out),
                   figure_eps_sweep(plt, sweep_data, sweep_gpus, sweep_values, args.out),
                   figure_training_sweep(plt, values, spreads, dims, gpus, steps, args.out)]
        for block, files in rt.APART_BLOCKS.items():  # a run shown apart: figures of its own
            other, other_dims, other_gpus, other_spreads = load_bench(rt.default_paths(files))
            shapes = [s for s in rt.ALL_SHAPES if any(k[2] == s for k in other)]
            written.append(figure_ratio_to_floor(plt, other, other_gpus, args.out, shapes,
                                                 block.replace("_summary", "") + "_time_memory.png"))
            written.append(figure_training_sweep(plt, other, other_spreads, other_dims, other_gpus, steps,
                                                 args.out,
                                                 H200_SWEEP_IMPLS if block == "h200_summary" else SWEEP_IMPLS,
                                                 block.replace("_summary", "") + "_training_sweep.png"))
    except Fault as e:
        print(f"figures.py: error: {e}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {os.path.relpath(path)} ({os.path.getsize(path) // 1024} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
