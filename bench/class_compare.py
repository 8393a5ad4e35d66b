#!/usr/bin/env python3
"""A class's benchmark run on its own GPU, set beside ours: the results page for that GPU.

    python3 bench/class_compare.py CLASS_JSON [--out-dir docs] [--ctest-log FILE [--ctest-what TEXT]] [--ours FILE ...]
                                   [--sm80 FILE]

CLASS_JSON is cce_bench's JSON from the class's GPU (bench/class_run.sh makes it). Writes, in --out-dir:
  bench_<gpu>_<commit>.json   a copy of CLASS_JSON under its GPU's and commit's name
  results_<gpu>.md            the page: the GPU and the run, the GPU tests' summary line (--ctest-log; --ctest-what
                              says which tests ran), and per
                              shape a table of every case in both runs: the class's median time and its spread,
                              ours, their ratio, and a flag where they differ by more than the run-to-run spread
  figures/class_<gpu>.png     the class's time over ours per case (with matplotlib; the page says when it is not
                              drawn)
<gpu> is the GPU's name in lower case, words joined by "_", without "nvidia" (NVIDIA A100-SXM4-80GB: a100_sxm4_80gb).

Ours: by default the files of docs/results.md (bench/results_table.py's FILES; one value per case, the newest run,
as there), or the --ours files. On a GPU of compute capability 8.x the page also shows our run of the sm_80 code
paths on an H100 (--sm80, default docs/bench_sm80_h100.json), the nearest we have to an A100.

The spread of a run's case is the range of its repetitions' times (max − min), or, where a file kept only the
standard deviation, 2 sd. A case is flagged when |class median − our median| exceeds the larger of the two
spreads; without a spread on either side it is not judged ("?").

Python 3 standard library (matplotlib for the figure). Exit status 2, with a one-line message, on a missing or
malformed file; 0 otherwise (a flag is a finding, not an error).
"""

import argparse
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_table  # noqa: E402  (its loading, the newest-run rule, the shapes and formats)

ROOT = results_table.ROOT


def gpu_slug(name):
    words = re.findall(r"[a-z0-9]+", name.lower())
    return "_".join(w for w in words if w != "nvidia") or "gpu"


def commit_of(context):
    match = re.match(r"[0-9a-f]{7,40}", str(context.get("cce_commit", "")))
    return match.group(0)[:7] if match else "unknown"


def spread_of(result):
    """(span in ms, how it was measured) or (None, None)."""
    span = result.spread()
    if span is not None:
        return span[1] - span[0], "range"
    sd = result.stddev()
    if sd is not None:
        return 2 * sd, "2 sd"
    return None, None


def cell_ms(result):
    values = result.values() if result is not None and result.error is None else None
    if not values:
        return None
    span = result.spread()
    text = results_table.fmt_ms(values["ms"])
    if span is not None:
        text += f" ({results_table.fmt_ms(span[0])}–{results_table.fmt_ms(span[1])})"
    return values["ms"], text


def compare(theirs, ours):
    """(ratio, verdict) of one case: verdict 'within', 'faster', 'slower' or '?' (no spread known)."""
    t, o = theirs.values()["ms"], ours.values()["ms"]
    spreads = [s for s, _ in (spread_of(theirs), spread_of(ours)) if s is not None]
    if not spreads:
        return t / o, "?"
    if abs(t - o) <= max(spreads):
        return t / o, "within"
    return t / o, "slower" if t > o else "faster"


def load_many(paths):
    return results_table.select([(p, *results_table.load(p)) for p in paths])


def draw(rows, path):
    """The class's time over ours per case; returns None, or why it was not drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is missing (apt-get install python3-matplotlib)"
    if not rows:
        return "no case is in both runs"
    labels = [f"{shape} {results_table.short_impl(impl)} {mode}" for shape, impl, mode, *_ in rows]
    ratios = [r[3] for r in rows]
    colors = {"slower": "tab:red", "faster": "tab:green"}
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(rows) + 1.2))
    ax.barh(range(len(rows)), ratios, color=[colors.get(r[4], "tab:gray") for r in rows])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("the class's median time / ours")
    ax.set_title("red: slower, green: faster, by more than the spread", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def ctest_summary(path, what=None):
    if path is None:
        return "not run with this page (bench/class_run.sh runs them)"
    if what:
        return f"{what}: {ctest_summary(path)}"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [l.strip() for l in f if re.match(r"\s*\d+% tests passed", l)]
    except OSError as e:
        raise results_table.InputFault(f"cannot read {path}: {e.strerror or e}")
    return f"`{lines[-1]}` (`{os.path.basename(path)}`)" if lines else f"no ctest summary line in `{path}`"


def page(class_path, context, rows, missing, ours_gpus, sm80_note, ctest_line, figure_note, figure_name):
    gpu = context.get("gpu_name", "an unnamed GPU")
    lines = [f"# Results on {gpu}: the class's run", ""]
    lines.append(f"A run of `bench/class_run.sh` on one **{gpu}** (compute capability "
                 f"{context.get('gpu_compute_capability', '?')}, {context.get('gpu_sm_count', '?')} SMs), "
                 f"{context.get('date', 'undated')}, stages built from commit {commit_of(context)} "
                 f"(CUDA runtime {context.get('cuda_runtime_version', '?')}), set beside ours "
                 f"({', '.join(ours_gpus) or 'our files'}, [results.md](results.md)). "
                 f"Its benchmark file: `{os.path.basename(class_path)}`; tile paths: "
                 f"{context.get('cce_tile_paths', 'not recorded')}.")
    lines += ["", f"**GPU tests:** {ctest_line}.", ""]
    lines.append("**How to read it.** Times are medians of the repetitions, in ms, with the fastest and slowest "
                 "repetition in parentheses. *class/ours* is the class's median over ours. A case is flagged "
                 "**slower** or **faster** when the two medians differ by more than the larger run-to-run spread "
                 "of the two (the range of the repetitions; 2 standard deviations where a file kept no range), "
                 "*within* otherwise, and *?* where neither run has a spread. Another GPU is expected to differ: "
                 "the flags say which differences are larger than the noise of one run.")
    if sm80_note:
        lines += ["", sm80_note]
    flagged = [r for r in rows if r[4] in ("slower", "faster")]
    lines += ["", f"**{len(flagged)} of {len(rows)} cases** differ from ours by more than the spread "
                  f"({sum(r[4] == 'slower' for r in flagged)} slower, {sum(r[4] == 'faster' for r in flagged)} faster)."]
    if figure_note:
        lines += ["", f"(No figure: {figure_note}.)"]
    else:
        lines += ["", f"![the class's time over ours per case](figures/{figure_name})"]
    by_shape = {}
    for row in rows:
        by_shape.setdefault(row[0], []).append(row)
    for shape in sorted(by_shape, key=results_table.shape_order):
        lines += ["", f"## {shape}", ""]
        sm80 = any(r[6] is not None for r in by_shape[shape])
        head = "| implementation | mode | class ms | ours ms | class/ours | beyond the spread |"
        rule = "| --- | --- | ---: | ---: | ---: | --- |"
        if sm80:
            head += " ours, sm_80 paths ms |"
            rule += " ---: |"
        lines += [head, rule]
        for _, impl, mode, ratio, verdict, cells, sm80_cell in by_shape[shape]:
            mark = f"**{verdict}**" if verdict in ("slower", "faster") else verdict
            row = f"| {impl} | {mode} | {cells[0]} | {cells[1]} | {ratio:.2f} | {mark} |"
            if sm80:
                row += f" {sm80_cell or results_table.DASH} |"
            lines.append(row)
    if missing:
        lines += ["", "Cases of the class's run that ours does not have (not compared): " +
                  ", ".join("/".join(k) for k in missing) + "."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("class_json")
    parser.add_argument("--out-dir", default=os.path.join(ROOT, "docs"))
    parser.add_argument("--ctest-log", help="the GPU tests' ctest output (its summary line goes on the page)")
    parser.add_argument("--ctest-what", help="which tests the log is of (goes on the page before its summary line)")
    parser.add_argument("--ours", nargs="+", help="our benchmark files (default: docs/results.md's)")
    parser.add_argument("--sm80", default=os.path.join(ROOT, "docs", "bench_sm80_h100.json"))
    args = parser.parse_args()
    try:
        context, theirs = results_table.load(args.class_json)
        ours_paths = args.ours or [os.path.join(ROOT, "docs", f) for f in results_table.FILES]
        ours = load_many(ours_paths)
        ours_gpus = sorted({str(results_table.load(p)[0]["gpu_name"]) for p in ours_paths
                            if "gpu_name" in results_table.load(p)[0]})
        sm80, sm80_note = {}, None
        if str(context.get("gpu_compute_capability", "")).startswith("8."):
            sm80 = load_many([args.sm80])
            sm80_note = (f"On this GPU the stages run their sm_80 code paths (mma.sync, cp.async): the last column is "
                         f"our run of those paths on an H100 (`{os.path.basename(args.sm80)}`), forward only.")
        slug, commit = gpu_slug(str(context.get("gpu_name", "gpu"))), commit_of(context)
        rows, missing = [], []
        for key in sorted(theirs, key=lambda k: (results_table.shape_order(k[2]), results_table.impl_order(k[0]),
                                                 k[1])):
            mine, other = theirs[key], ours.get(key)
            cells = cell_ms(mine), cell_ms(other) if other is not None else None
            if cells[0] is None:
                continue
            if cells[1] is None:
                missing.append(key)
                continue
            ratio, verdict = compare(mine, other)
            sm80_cell = cell_ms(sm80[key]) if key in sm80 else None
            rows.append((key[2], key[0], key[1], ratio, verdict, (cells[0][1], cells[1][1]),
                         sm80_cell[1] if sm80_cell else None))
        os.makedirs(args.out_dir, exist_ok=True)
        json_name = f"bench_{slug}_{commit}.json"
        if os.path.abspath(args.class_json) != os.path.abspath(os.path.join(args.out_dir, json_name)):
            shutil.copyfile(args.class_json, os.path.join(args.out_dir, json_name))
        figure_name = f"class_{slug}.png"
        figure_note = draw(rows, os.path.join(args.out_dir, "figures", figure_name))
        text = page(json_name, context, rows, missing, ours_gpus, sm80_note, ctest_summary(args.ctest_log, args.ctest_what),
                    figure_note, figure_name)
        out = os.path.join(args.out_dir, f"results_{slug}.md")
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    except results_table.InputFault as e:
        print(f"class_compare.py: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out}, {os.path.join(args.out_dir, json_name)}"
          + ("" if figure_note else f", {os.path.join(args.out_dir, 'figures', figure_name)}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
