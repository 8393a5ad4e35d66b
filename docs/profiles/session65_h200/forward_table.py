"""Call 1's ncu logs as a table: stage 10's forward kernel (the tile statistics' epilogue), stage 03's (the plain
fold) and the floor's GEMM (cuBLAS) at llama3's and gemma2's shapes, one launch each, ncu's full set (its fixed
clocks). Run from anywhere: python3 docs/profiles/session65_h200/forward_table.py"""
import os
import re

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "logs", "call1")
KERNELS = [("floor", "cuBLAS's GEMM"), ("stage03_fused_gemm_ce", "stage 03's fold"),
           ("stage10_plan_per_batch", "stage 10's tile statistics")]
METRICS = ["Duration", "Compute (SM) Throughput", "Issue Slots Busy", "L2 Hit Rate", "DRAM Throughput",
           "Executed Instructions"]


def read(shape, kernel):
    text = open(os.path.join(LOGS, "ncu_%s_%s.txt" % (shape, kernel))).read()
    name = re.search(r"^  (\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", text, re.M).group(1)
    values = {}
    for metric in METRICS:
        m = re.search(r"^    %s\s+\S+\s+([\d.,]+)\s*$" % re.escape(metric), text, re.M)
        values[metric] = float(m.group(1).replace(",", ""))
    return re.sub(r"\(.*", "", name), values


print("| shape | kernel | ms | × cuBLAS | SM throughput % | issue slots % | L2 hit % | DRAM % | warp instructions (G) |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for shape in ("llama3", "gemma2"):
    floor = read(shape, "floor")[1]["Duration"]
    for kernel, label in KERNELS:
        name, v = read(shape, kernel)
        print("| %s | %s (`%s`) | %.2f | %.3f | %.1f | %.1f | %.1f | %.1f | %.2f |" % (
            shape, label, name.replace("void ", ""), v["Duration"], v["Duration"] / floor,
            v["Compute (SM) Throughput"], v["Issue Slots Busy"], v["L2 Hit Rate"], v["DRAM Throughput"],
            v["Executed Instructions"] / 1e9))
