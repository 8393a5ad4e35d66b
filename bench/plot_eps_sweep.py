#!/usr/bin/env python3
"""Stage 10's eps curves from bench/drop_eps_sweep's JSON files.

    python3 bench/plot_eps_sweep.py docs/drop_eps_sweep.json docs/drop_eps_sweep_lm32k.json \
        --peers docs/bench_peers_stage08.json docs/bench_peers_stage08_lm32k.json \
        --out stages/10_plan_per_batch/eps_curves.png

One panel per shape: dE and dC relative L2 error against eps (with the tail
correction and without), the kept fraction of tiles on a second axis, and
eager PyTorch's dE and dC error from the peers' JSON as horizontal lines.
Needs matplotlib; exit status 2 with one line on a missing or malformed file.
"""

import argparse
import json
import sys


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        sys.exit(f"plot_eps_sweep.py: {path}: {e}")


def eager_errors(peer_files):
    out = {}
    for path in peer_files:
        for b in load(path).get("benchmarks", []):
            name = b.get("run_name", "")
            if b.get("aggregate_name") == "median" and name.startswith("peer_torch_eager/loss_grad/"):
                out[name.split("/")[2]] = (b.get("dE_rel_err"), b.get("dC_rel_err"))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweeps", nargs="+")
    p.add_argument("--peers", nargs="*", default=[])
    p.add_argument("--out", required=True)
    args = p.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_eps_sweep.py: needs matplotlib (pip install matplotlib)")
    shapes, gpu = [], None
    for path in args.sweeps:
        data = load(path)
        gpu = gpu or data.get("context", {}).get("gpu")
        shapes += data.get("shapes", [])
    if not shapes:
        sys.exit("plot_eps_sweep.py: no shapes in the sweep files")
    eager = eager_errors(args.peers)
    fig, axes = plt.subplots(1, len(shapes), figsize=(4.2 * len(shapes), 3.8), squeeze=False)
    for ax, shape in zip(axes[0], shapes):
        rows = [r for r in shape["rows"] if r["eps_exponent"] > 0 and not r.get("automatic")]
        for correction, style in (("dE+dC", "-"), ("none", ":")):
            sel = sorted((r for r in rows if r["correction"] == correction), key=lambda r: r["eps_exponent"])
            if not sel:
                continue
            x = [-r["eps_exponent"] for r in sel]
            label = "corrected" if correction == "dE+dC" else "dropped only"
            ax.plot(x, [r["dE_rel_err"] for r in sel], "C0" + style, marker="o", ms=3, label=f"dE, {label}")
            ax.plot(x, [r["dC_rel_err"] for r in sel], "C1" + style, marker="s", ms=3, label=f"dC, {label}")
        if shape["name"] in eager:
            de, dc = eager[shape["name"]]
            if de:
                ax.axhline(de, color="C0", lw=0.8, alpha=0.5)
            if dc:
                ax.axhline(dc, color="C1", lw=0.8, alpha=0.5, ls="--")
        ax.set_yscale("log")
        ax.set_xlabel("log2 eps")
        ax.set_title(f"{shape['name']} (N={shape['n']} D={shape['d']} V={shape['v']})", fontsize=9)
        kept = sorted((r for r in rows if r["correction"] == "dE+dC"), key=lambda r: r["eps_exponent"])
        twin = ax.twinx()
        twin.plot([-r["eps_exponent"] for r in kept], [100 * r["kept_frac"] for r in kept], "C2--", lw=1)
        twin.set_ylabel("tiles kept (%)", color="C2", fontsize=8)
        twin.set_yscale("log")
    axes[0][0].set_ylabel("relative L2 error vs fp32")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Stage 10: error and kept tiles against eps ({gpu}); thin lines: eager PyTorch", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
