#!/usr/bin/env python3
"""Why a median timed back to back on an H200 depends on what ran just before: the GPU's power cap, from one
device call's own logs (session 28; docs/profiles/session28_h200/).

    /usr/bin/python3 bench/power_cap_figure.py [--smi CSV] [--probe JSON] [--out docs/figures/power_cap_h200.png]

--smi: `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active
--format=csv -lms 100`, logged through the whole call (cce_bench at five shapes, then the probe).
--probe: docs/profiles/session28_h200/dense_gap_probe.py's JSON: stage 10's C interface at each shape, 20 calls
each timed with CUDA events after a synchronization (as cce_bench and peers.py time a call), in three runs: back to
back, with 10 ms of idle GPU after each call, and back to back again.

The figure shows (a) every sample's SM clock against its power draw, the samples whose active reasons include the
software power cap (bit 0x4) marked; (b) at each shape, the three runs' median and fastest-slowest call, as a
multiple of the median with the GPU idle between calls.

The script asserts what the figure shows: every sample drawing 650 W or more has the power-cap reason set; their
median SM clock is below 0.8 of the median clock of the samples with no reason active; at every shape both
back-to-back runs' medians are at least 3% above the idle-between run's. Exit 1 (DOES NOT HOLD) when one fails;
2 on a bad flag or an unreadable file. Needs matplotlib.
"""

import csv
import json
import statistics
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
LOGS = REPO / "docs" / "profiles" / "session28_h200" / "logs"
DEFAULT_SMI = LOGS / "call4_nvidia_smi.csv"
DEFAULT_PROBE = LOGS / "call4_probe.json"
DEFAULT_OUT = REPO / "docs" / "figures" / "power_cap_h200.png"
PROG = "power_cap_figure.py"
Parser = figure_cli.parser_class(PROG)

POWER_CAP = 0x4        # nvidia-smi's clocks_event_reasons: software power cap
HIGH_DRAW_W = 650.0    # "at the cap": the 700 W card's samples within 50 W of it
CLOCK_DROP = 0.8       # at the cap the clock is below this share of the unthrottled clock
SLOWER = 1.03          # back to back at least this much slower than with idle between
RUNS = (("back_to_back", "back to back"), ("idle_10ms_between", "10 ms idle after each"),
        ("back_to_back_again", "back to back again"))


def read_smi(path):
    """[(sm_mhz, draw_w, reasons)] from nvidia-smi's CSV, or exit 2 naming what is wrong."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except OSError as error:
        figure_cli.fail(PROG, f"--smi {path}: {error.strerror}")
    if not rows or len(rows[0]) < 5 or "clocks.current.sm" not in rows[0][1] or "power.draw" not in rows[0][2]:
        figure_cli.fail(PROG, f"--smi {path}: not nvidia-smi's CSV of timestamp, clocks.sm, power.draw, "
                              "temperature.gpu, clocks_throttle_reasons.active")
    samples = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            samples.append((int(row[1].split()[0]), float(row[2].split()[0]), int(row[4].strip(), 16)))
        except (IndexError, ValueError):
            figure_cli.fail(PROG, f"--smi {path}: line {number} is not a sample: {','.join(row)[:60]}")
    if not samples:
        figure_cli.fail(PROG, f"--smi {path}: no samples")
    return samples


def read_probe(path):
    """{shape: {run: {gpu_ms_median, gpu_ms_min, gpu_ms_max}}} for the three runs, or exit 2."""
    try:
        with open(path) as f:
            shapes = json.load(f)["shapes"]
        probe = {shape: {run: {k: float(v[run][k]) for k in ("gpu_ms_median", "gpu_ms_min", "gpu_ms_max")}
                         for run, _ in RUNS} for shape, v in shapes.items()}
    except OSError as error:
        figure_cli.fail(PROG, f"--probe {path}: {error.strerror}")
    except (ValueError, KeyError, TypeError) as error:
        figure_cli.fail(PROG, f"--probe {path}: not dense_gap_probe.py's JSON with the three runs ({error!r})")
    if not probe:
        figure_cli.fail(PROG, f"--probe {path}: no shapes")
    return probe


def summary(samples):
    """The samples at the cap (>= HIGH_DRAW_W), their median clock, and the median clock with no reason active."""
    high = [s for s in samples if s[1] >= HIGH_DRAW_W]
    free = [s[0] for s in samples if s[2] == 0]
    return high, (statistics.median(s[0] for s in high) if high else None), \
        (statistics.median(free) if free else None)


def claims(samples, probe):
    high, high_clock, free_clock = summary(samples)
    out = [(bool(high) and all(s[2] & POWER_CAP for s in high),
            f"every sample at {HIGH_DRAW_W:.0f} W or more has the power-cap reason (0x4) set "
            f"({sum(1 for s in high if s[2] & POWER_CAP)} of {len(high)})"),
           (high_clock is not None and free_clock is not None and high_clock < CLOCK_DROP * free_clock,
            f"the median SM clock at {HIGH_DRAW_W:.0f} W or more ({high_clock} MHz) is below {CLOCK_DROP} of the "
            f"median with no reason active ({free_clock} MHz)")]
    for shape, runs in probe.items():
        idle = runs["idle_10ms_between"]["gpu_ms_median"]
        for run in ("back_to_back", "back_to_back_again"):
            ms = runs[run]["gpu_ms_median"]
            out.append((ms >= SLOWER * idle, f"{shape}: {run}'s median {ms:.3f} ms is at least {SLOWER}x the "
                                             f"idle-between median {idle:.3f}"))
    return out


def draw(out, samples, probe):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12.5, 4.6), gridspec_kw={"width_ratios": [1.1, 1]})
    groups = ((lambda s: s[2] & POWER_CAP, "power-cap reason set", "#d62728", "o"),
              (lambda s: not s[2] & POWER_CAP and s[2], "another reason (idle)", "#9467bd", "s"),
              (lambda s: s[2] == 0, "no reason: full clock", "#7f7f7f", "^"))
    for keep, label, color, marker in groups:
        picked = [s for s in samples if keep(s)]
        left.scatter([s[1] for s in picked], [s[0] for s in picked], s=10, alpha=0.55, color=color, marker=marker,
                     label=f"{label} ({len(picked)})")
    left.axvline(HIGH_DRAW_W, color="black", lw=0.8, ls="--")
    left.text(HIGH_DRAW_W - 8, 400, f"{HIGH_DRAW_W:.0f} W", ha="right", fontsize=8)
    left.set_xlabel("power draw, W (nvidia-smi, every 100 ms)")
    left.set_ylabel("SM clock, MHz")
    left.set_title("(a) at the 700 W cap the clock falls", fontsize=10)
    left.legend(fontsize=8, loc="lower center")

    colors = ("#d62728", "#2ca02c", "#ff7f0e")
    shapes = list(probe)
    for row, shape in enumerate(shapes):
        idle = probe[shape]["idle_10ms_between"]["gpu_ms_median"]
        for k, ((run, label), color) in enumerate(zip(RUNS, colors)):
            r = probe[shape][run]
            y = row + (k - 1) * 0.22
            right.errorbar(r["gpu_ms_median"] / idle, y,
                           xerr=[[(r["gpu_ms_median"] - r["gpu_ms_min"]) / idle],
                                 [(r["gpu_ms_max"] - r["gpu_ms_median"]) / idle]],
                           fmt="o", color=color, capsize=3, label=label if row == 0 else None)
            right.text(r["gpu_ms_max"] / idle + 0.01, y, f"{r['gpu_ms_median']:.2f} ms", va="center", fontsize=8)
    right.axvline(1.0, color="black", lw=0.8, ls=":")
    right.set_yticks(range(len(shapes)))
    right.set_yticklabels(shapes)
    right.set_ylim(len(shapes) - 0.5, -0.5)
    right.set_xlim(0.9, 1.55)
    right.set_xlabel("call time / median with 10 ms idle after each call\n(dot: median of 20; bar: fastest-slowest)")
    right.set_title("(b) stage 10's loss + grad, the same calls, three runs", fontsize=10)
    right.legend(fontsize=8, loc="center right")
    fig.suptitle("One NVIDIA H200: calls timed back to back run at the power cap", fontsize=11)
    fig.tight_layout()
    figure_cli.save_png(plt, fig, out, colors="rgb")


def main(argv):
    parser = Parser(description="The H200's power cap in one device call's logs, drawn and checked.")
    parser.add_argument("--smi", default=str(DEFAULT_SMI), help=f"nvidia-smi's CSV (default "
                        f"{DEFAULT_SMI.relative_to(REPO)})")
    parser.add_argument("--probe", default=str(DEFAULT_PROBE), help=f"the probe's JSON (default "
                        f"{DEFAULT_PROBE.relative_to(REPO)})")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    samples, probe = read_smi(args.smi), read_probe(args.probe)
    figure_cli.require_plotting(PROG, numpy=False)
    draw(out, samples, probe)
    high, high_clock, free_clock = summary(samples)
    print(f"{out}: {len(samples)} samples, {len(high)} at {HIGH_DRAW_W:.0f} W or more (median clock {high_clock} "
          f"MHz; {free_clock} MHz with no reason active); " + "; ".join(
              f"{shape} {r['back_to_back']['gpu_ms_median']:.2f} ms back to back, "
              f"{r['idle_10ms_between']['gpu_ms_median']:.2f} with idle between" for shape, r in probe.items()))
    return figure_cli.verdict(PROG, claims(samples, probe))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
