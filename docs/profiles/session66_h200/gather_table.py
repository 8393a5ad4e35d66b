"""Session 66's two tables from the committed logs (the tile engine's WORKLOG reads them):
  1. ncu (call 3, its fixed clocks): stage 10's gather and forward kernels at gemma2's and llama3's shapes with the
     separate gather kernel, with the pipeline gathering, and with the pipeline gathering but not waiting;
  2. cce_bench (call 2): stage 10's loss + grad, the two gathers in turns, three rounds, beside the floor.
    python3 docs/profiles/session66_h200/gather_table.py"""
import glob, json, os, re

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "logs")


def ncu_durations(path):
    """(kernel short name, duration in ms) per profiled launch, in order."""
    out, name = [], None
    for line in open(path):
        head = re.match(r"^  (?:void )?(?:\w+::)*(?:\(anonymous namespace\)::|unnamed>::)?(\w+)[<(]", line)
        if head:
            name = head.group(1)
        m = re.match(r"^\s+Duration\s+(us|ms)\s+([\d.]+)", line)
        if m and name:
            out.append((name, float(m.group(2)) / (1000.0 if m.group(1) == "us" else 1.0)))
    return out


def bench_medians(path):
    got = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") in ("median", "min", "max"):
            got.setdefault(b["run_name"].split("/iterations")[0], {})[b["aggregate_name"]] = b["real_time"]
    return got


print("| shape | gather | gather kernel ms | forward kernel ms | sum ms |")
print("| --- | --- | ---: | ---: | ---: |")
for shape in ("gemma2", "llama3"):
    for mode, label in (("separate", "gather_rows_kernel, then the forward"), ("fused", "the pipeline's producer warps"),
                        ("nowait", "the pipeline's, the loads not waiting (wrong statistics: timing only)")):
        runs = ncu_durations(os.path.join(HERE, "call3", "ncu_%s_%s.txt" % (shape, mode)))
        gather = sum(ms for name, ms in runs if name == "gather_rows_kernel")
        forward = [ms for name, ms in runs if name == "wgmma_pipeline_kernel"][0]
        print("| %s | %s | %s | %.2f | %.2f |" % (shape, label, "%.3f" % gather if gather else "–", forward,
                                                  gather + forward))

print()
floor = bench_medians(os.path.join(HERE, "call2", "bench_fused_1.json"))
print("| shape | round | pipeline's gather: ms (min–max), × floor | gather_rows_kernel: ms (min–max), × floor | change |")
print("| --- | ---: | --- | --- | ---: |")
for shape in ("llama3", "gemma2"):
    f = floor["cublas_floor/loss_grad/" + shape]["median"]
    for rnd in (1, 2, 3):
        cells = []
        for mode in ("fused", "separate"):
            r = bench_medians(os.path.join(HERE, "call2", "bench_%s_%d.json" % (mode, rnd)))[
                "stage10_plan_per_batch/loss_grad/" + shape]
            cells.append(r)
        text = ["%.3f (%.3f–%.3f), %.3f×" % (r["median"], r["min"], r["max"], r["median"] / f) for r in cells]
        print("| %s | %d | %s | %s | %+.1f%% |" % (shape, rnd, text[0], text[1],
                                                  100 * (cells[0]["median"] / cells[1]["median"] - 1)))
    print("| %s | floor | %.3f ms (call 2, round 1) | | |" % (shape, f))
