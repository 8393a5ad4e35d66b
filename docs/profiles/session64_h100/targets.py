#!/usr/bin/env python3
"""Session 64: issue 25's and 26's targets against this session's H100 run, read from the committed files
(docs/bench_h100_3ae9c50.json, docs/bench_peers_h100_3ae9c50.json, logs/call4b/, logs/call5/). Prints one Markdown
row per target: what the issue asks, what was measured (median and the repetitions' min-max), met or not. A report of
the issue's targets, not a test of a claim: a target not met is printed as such; a file or case missing stops it.

    python3 docs/profiles/session64_h100/targets.py     (from the repository root)
"""
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import results_table as rt  # noqa: E402  (the parser behind docs/results.md)

STAGE, OP, FLOOR, EAGER = "stage10_plan_per_batch", "stage10_plan_per_batch_op", "cublas_floor", "peer_torch_eager"
results = {}
for name in ("bench_h100_3ae9c50.json", "bench_peers_h100_3ae9c50.json"):
    results.update(rt.load(os.path.join(ROOT, "docs", name))[1])
shapes = sorted({shape for _, _, shape in results}, key=rt.shape_order)
peers = sorted({impl for impl, _, _ in results if impl.startswith("peer_")}, key=rt.impl_order)


def case(impl, shape, mode="loss_grad"):
    return results[(impl, mode, shape)]


def ms(impl, shape, mode="loss_grad"):
    return case(impl, shape, mode).values()["ms"]


def timed(impl, shape, mode="loss_grad"):
    low, high = case(impl, shape, mode).spread()
    return "%.4g (%.4g–%.4g)" % (ms(impl, shape, mode), low, high)


def row(target, measured, met):
    print("| %s | %s | %s |" % (target, measured, "met" if met else "**not met**"))


print("| target (issue 25, H100) | measured on one H100, 3ae9c50 | |\n| --- | --- | --- |")
for shape, limit in (("gemma2", 16), ("llama3", 14), ("gpt2", 4.5), ("lm128k", 10), ("lm32k", 1.5),
                     ("gemma2_flat", 46)):
    row("%s ≤ %g ms" % (shape, limit), timed(STAGE, shape) + " ms, %.3f× the floor" % (ms(STAGE, shape) /
        ms(FLOOR, shape)), ms(STAGE, shape) <= limit)
flat_mb = case(STAGE, "gemma2_flat").values()["peak_MB"]
row("gemma2_flat ≤ 3000 MB", "%.0f MB" % flat_mb, flat_mb <= 3000)
gemma2_mb = case(STAGE, "gemma2").values()["peak_MB"]
row("gemma2 peak ≤ 1400 MB (sparse plan)", "%.2f MB" % gemma2_mb, gemma2_mb <= 1400)
for who in (STAGE, OP):
    slower = [(shape, peer) for shape in shapes for peer in peers
              if (peer, "loss_grad", shape) in results and results[(peer, "loss_grad", shape)].values()
              and ms(who, shape) > ms(peer, shape)]
    row("%s at or below every peer, every shape" % ("stage 10 (cce_bench)" if who == STAGE else "stage 10's op"),
        "%d shapes × %s; over: %s" % (len(shapes), ", ".join(rt.short_impl(p) for p in peers),
                                      ", ".join("%s at %s (%.4g against %.4g)" % (rt.short_impl(p), s, ms(who, s),
                                                ms(p, s)) for s, p in slower) or "none"), not slower)
over = []
for shape in shapes:
    ours, eager = case(STAGE, shape).values(), case(EAGER, shape).values()
    for err in ("dE_rel_err", "dC_rel_err"):
        if ours[err] > eager[err]:
            over.append("%s %s %.4g > %.4g" % (shape, err[:2], ours[err], eager[err]))
row("dE and dC error ≤ eager's, every shape", "over: " + (", ".join(over) or "none"), not over)
ratios = ["%s %+.1f%%" % (shape, 100 * (ms(STAGE, shape, "loss") / ms(FLOOR, shape, "loss") - 1)) for shape in shapes]
worst = max(ms(STAGE, s, "loss") / ms(FLOOR, s, "loss") for s in shapes if s != "gemma2_softcap")
row("loss alone within 3% of the floor's forward GEMM", ", ".join(ratios) + " (gemma2_softcap's tanh is not in the "
    "floor)", worst <= 1.03)
stage06 = ms("stage06_fused_backward", "gemma2_flat")
row("stage 06 ≤ 70 ms (gemma2's shape)", timed("stage06_fused_backward", "gemma2_flat") + " ms at gemma2_flat",
    stage06 <= 70)
sys.path.insert(0, os.path.join(HERE, "..", "device_steps"))
from ncu_durations import durations  # noqa: E402

# The kept-tile kernels at llama3's shape with every pair kept: 2·128·128·D flop per kept pair and product, 64120 of
# 64128 pairs kept (session 61's kept_tflops.py counts them the same way).
flop = 2 * 128 * 128 * 4096 * 64120
tflops = {k: flop / us / 1e6 for k, (n, us) in durations(os.path.join(HERE, "logs", "call5", "ncu_llama3_flat_main.txt")).items()
          if k in ("recompute_kept_kernel", "de_products_bf16", "dc_products_bf16")}
row("kept products ≥ 550 TFLOP/s (llama3, every pair kept; ncu)", ", ".join("%s %.0f" % kv for kv in tflops.items()),
    len(tflops) == 3 and min(tflops.values()) >= 550)
rounds = []
for path in sorted(glob.glob(os.path.join(HERE, "logs", "call4b", "ratio_*.json"))):
    one = rt.load(path)[1]
    rounds.append(tuple(one[(impl, "loss_grad", shape)].values()["ms"] for shape in ("llama3", "gemma2")
                        for impl in (STAGE, FLOOR)))
print("\nllama3 and gemma2 in %d more processes (call 4b; stage 10 ms, × the floor of the same process):" % len(rounds))
for l_ms, l_floor, g_ms, g_floor in rounds:
    print("- llama3 %.3f (%.4f×), gemma2 %.3f (%.4f×)" % (l_ms, l_ms / l_floor, g_ms, g_ms / g_floor))

print("\n| target (issue 26) | process | gemma2 | lm32k's shape | |\n| --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(os.path.join(HERE, "logs", "call4b", "op_overhead_*.json"))):
    probe = json.load(open(path))
    cells, met = [], True
    for shape in ("gemma2", "lm32k"):
        c_call, op = (probe["shapes"][shape][k]["gpu_ms_median"] for k in ("c_call", "op_with_backward"))
        cells.append("%.3f → %.3f ms (%+.1f%%)" % (c_call, op, 100 * (op / c_call - 1)))
        met = met and op <= 1.03 * c_call
    row("the op within 3%% of the C call, synchronized | %s" % os.path.basename(path)[12:-5], " | ".join(cells), met)
