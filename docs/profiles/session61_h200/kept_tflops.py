"""The kept-tile kernels' summed ncu durations in a stage 10 log at llama3's shape with every pair kept, and their
TFLOP/s at 2·128·128·D per kept pair and product (64120 of 64128 pairs kept: session 31)."""
import collections
import re
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
total = collections.OrderedDict()
name = None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"(recompute_kept_kernel|dc_products_bf16|de_products_bf16)", line)
    if m and "gpu__time_duration" not in line and not line.startswith("==PROF=="):
        name = m.group(1)
        continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        us = float(m.group(2).replace(",", "")) * UNITS.get(m.group(1), 1.0)
        entry = total.setdefault(name, [0, 0.0])
        entry[0] += 1
        entry[1] += us
        name = None
flop = 2 * 128 * 128 * 4096 * 64120
for k, (n, us) in total.items():
    print("  %-22s %4d launches %10.1f us %6.0f TFLOP/s" % (k, n, us, flop / us / 1e6))
