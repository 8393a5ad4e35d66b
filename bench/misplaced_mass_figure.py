#!/usr/bin/env python3
"""Why stage 10 chooses eps from the misplaced mass: what each candidate eps drops and misplaces at eight shapes,
and which of them keep the gradient's errors at or below eager PyTorch's, from the drop emulated in fp32 on one H200
(session 52, call 2: docs/profiles/session52_h200/).

    /usr/bin/python3 bench/misplaced_mass_figure.py [--emulated JSON ...] [--out docs/figures/misplaced_mass.png]

--emulated: docs/profiles/session51_h200/emulate_drop.py's JSON (default: call 2's two files, the generated shapes
and one training of lm128k's and lm32k's models), any number of them. Per shape and eps it holds the dropped mass D
and the misplaced mass R per row (mean over the rows with a gradient) and the bf16 dE and dC errors of the drop as
stage 10 makes it, beside eager's on the same inputs.

The figure shows, against eps = 2^-8 ... 2^-17, (a) R with stage 10's budget (kDefaultMisplacedMass, read from
stages/10_plan_per_batch/plan_per_batch.h), (b) D with the budget it replaced (0.025, candidates to 2^-16); a filled
marker where both errors are at or below eager's, a cross where one is over; a ring on each rule's choice (the first
candidate within the budget, else the last). The emulation ran whole exponents only: the stage's candidates between them
(2^-8.25, 2^-8.5, ...) are not drawn, and the ring is the choice among whole exponents.

The script asserts what the figure shows: R ≤ D at every shape and eps; at every shape the errors at R's choice are
at or below eager's; at some shape they are not at D's choice. Exit 1 (DOES NOT HOLD) when one fails; 2 on a bad
flag or a file that is not emulate_drop.py's JSON. Needs matplotlib.
"""

import json
import re
import sys
from pathlib import Path

import figure_cli

REPO = Path(__file__).resolve().parent.parent
CALL2 = REPO / "docs" / "profiles" / "session52_h200" / "logs" / "call2"
DEFAULT_EMULATED = [CALL2 / "emulated_generated.json", CALL2 / "emulated_lm.json"]
DEFAULT_OUT = REPO / "docs" / "figures" / "misplaced_mass.png"
PLAN_HEADER = REPO / "stages" / "10_plan_per_batch" / "plan_per_batch.h"
PROG = "misplaced_mass_figure.py"
Parser = figure_cli.parser_class(PROG)

FIRST = 8
DROPPED_BUDGET, DROPPED_LAST = 0.025, 16  # the rule stage 10 had before the misplaced mass
FIELDS = ("eps_exponent", "dropped_mass_per_row", "residual_bound_per_row", "bf16_dE", "bf16_dC")


def stage_rule():
    """(budget, last exponent) from plan_per_batch.h, or exit 2."""
    try:
        text = PLAN_HEADER.read_text()
    except OSError as error:
        figure_cli.fail(PROG, f"{PLAN_HEADER}: {error.strerror}")
    budget = re.search(r"kDefaultMisplacedMass\s*=\s*([0-9.]+)", text)
    last = re.search(r"kAutoLastExponent\s*=\s*(\d+)", text)
    if not budget or not last:
        figure_cli.fail(PROG, f"{PLAN_HEADER}: no kDefaultMisplacedMass or kAutoLastExponent")
    return float(budget.group(1)), int(last.group(1))


def read_emulated_data(data, where="the data"):
    """{shape: {"eager": (dE, dC), "eps": {exponent: row}}} from one emulate_drop.py JSON object, or exit 2."""
    shapes = {}
    try:
        for name, shape in data["shapes"].items():
            rows = {int(r["eps_exponent"]): {k: float(r[k]) for k in FIELDS} for r in shape["eps"]}
            shapes[name] = {"eager": (float(shape["eager"]["dE"]), float(shape["eager"]["dC"])), "eps": rows}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        figure_cli.fail(PROG, f"{where}: not emulate_drop.py's JSON (no {error})")
    return shapes


def read_emulated(paths):
    """The shapes of emulate_drop.py's JSON files, or exit 2."""
    shapes = {}
    for path in paths:
        try:
            with open(path) as f:
                data = json.load(f)
        except OSError as error:
            figure_cli.fail(PROG, f"--emulated {path}: {error.strerror}")
        except json.JSONDecodeError as error:
            figure_cli.fail(PROG, f"--emulated {path}: not JSON ({error.msg}, line {error.lineno})")
        shapes.update(read_emulated_data(data, f"--emulated {path}"))
    if not shapes:
        figure_cli.fail(PROG, "--emulated: no shapes")
    return shapes


def within_eager(shape, exponent):
    row = shape["eps"][exponent]
    return row["bf16_dE"] <= shape["eager"][0] and row["bf16_dC"] <= shape["eager"][1]


def choice(shape, field, budget, last):
    """The first candidate 2^-FIRST ... 2^-last whose field is within the budget, else the last."""
    for e in range(FIRST, last + 1):
        if shape["eps"][e][field] <= budget:
            return e
    return last


def claims(shapes, budget, last):
    out = []
    for name, shape in shapes.items():
        missing = [e for e in range(FIRST, last + 1) if e not in shape["eps"]]
        if missing:
            out.append((False, f"{name}: every candidate emulated (missing 2^-{missing[0]})"))
            continue
        worst = max(shape["eps"][e]["residual_bound_per_row"] - shape["eps"][e]["dropped_mass_per_row"]
                    for e in range(FIRST, last + 1))
        out.append((worst <= 1e-9, f"{name}: R ≤ D at every candidate (largest R − D {worst:.3g})"))
        chosen = choice(shape, "residual_bound_per_row", budget, last)
        out.append((within_eager(shape, chosen), f"{name}: dE and dC at R's choice 2^-{chosen} at or below eager's"))
    old = {name: choice(s, "dropped_mass_per_row", DROPPED_BUDGET, DROPPED_LAST) for name, s in shapes.items()
           if all(e in s["eps"] for e in range(FIRST, DROPPED_LAST + 1))}
    over = [name for name, e in old.items() if not within_eager(shapes[name], e)]
    out.append((bool(over), f"at some shape the dropped mass's choice (budget {DROPPED_BUDGET}) is over eager's"))
    return out


def draw(out, shapes, budget, last):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 5.2), sharey=True)
    colors = plt.get_cmap("tab10").colors
    panels = ((axes[0], "residual_bound_per_row", budget, last,
               f"(a) misplaced mass R, budget {budget:g} (stage 10)"),
              (axes[1], "dropped_mass_per_row", DROPPED_BUDGET, DROPPED_LAST,
               f"(b) dropped mass D, budget {DROPPED_BUDGET:g} (the rule it replaced)"))
    for ax, field, rule_budget, rule_last, title in panels:
        for k, (name, shape) in enumerate(shapes.items()):
            color = colors[k % len(colors)]
            xs = list(range(FIRST, rule_last + 1))
            ys = [max(shape["eps"][e][field], 1e-5) for e in xs]
            ax.plot(xs, ys, color=color, lw=1.2, label=name)
            for e, y in zip(xs, ys):
                if within_eager(shape, e):
                    ax.plot(e, y, "o", color=color, ms=5)
                else:
                    ax.plot(e, y, "x", color=color, ms=7, mew=1.8)
            e = choice(shape, field, rule_budget, rule_last)
            ax.plot(e, max(shape["eps"][e][field], 1e-5), "o", ms=13, mfc="none", mec=color, mew=1.6)
        ax.axhline(rule_budget, color="black", ls="--", lw=1)
        ax.text(last + 0.3, rule_budget * 1.12, f"budget {rule_budget:g}", fontsize=8, ha="right")
        ax.set_yscale("log")
        ax.set_xticks(range(FIRST, last + 1))
        ax.set_xticklabels([f"$2^{{-{e}}}$" for e in range(FIRST, last + 1)])
        ax.set_xlim(FIRST - 0.4, last + 0.4)
        ax.set_xlabel("eps")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean per row with a gradient")
    axes[1].legend(fontsize=8, loc="lower left")
    fig.suptitle("Each candidate eps: dot, dE and dC at or below eager PyTorch's; cross, one over; ring, the rule's "
                 "choice\n(stage 10's drop emulated in fp32, rounded as in bf16; one H200, one training of each model)",
                 fontsize=10)
    fig.tight_layout()
    figure_cli.save_png(plt, fig, out, colors="rgb")


def main(argv):
    parser = Parser(description="The misplaced and the dropped mass per candidate eps, and the errors, drawn and "
                                "checked.")
    parser.add_argument("--emulated", nargs="+", default=[str(p) for p in DEFAULT_EMULATED],
                        help="emulate_drop.py's JSON files (default: session 52's call 2)")
    figure_cli.add_out_flag(parser, DEFAULT_OUT, REPO)
    args = parser.parse_args(argv)
    out = figure_cli.checked_png(PROG, args.out)
    shapes = read_emulated(args.emulated)
    budget, last = stage_rule()
    found = claims(shapes, budget, last)
    figure_cli.require_plotting(PROG, numpy=False)
    if all(holds for holds, _ in found[:-1]):
        draw(out, shapes, budget, last)
    print(f"{out}: budget {budget:g}, candidates 2^-{FIRST}..2^-{last}; R's choice: " + ", ".join(
        f"{name} 2^-{choice(s, 'residual_bound_per_row', budget, last)}" for name, s in shapes.items()
        if all(e in s["eps"] for e in range(FIRST, last + 1))))
    return figure_cli.verdict(PROG, found)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
