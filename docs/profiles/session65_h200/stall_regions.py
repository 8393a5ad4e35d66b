"""Call 3's SASS export split by how often each instruction ran (gemma2's shape: 64000 tiles of 36 k-slices, eight
consumer warps a tile): the consumers' k-slice loop (executed 36 · 64000 · 8 times or one slice fewer), their
per-tile code (the epilogue and the tile's end, a multiple of 64000 · 8 = 512000 executions), and the rest (the
producer, the units' begin and end, the prologue). Prints each part's share of the stall samples, which sample every
resident warp at fixed intervals, issuing or not. Usage: python3 stall_regions.py [EXPORT.csv.gz]"""
import os
import sys

from stall_lines import number, read_export

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "logs",
                                                           "call3", "source_sass.csv.gz")
header, rows = read_export(path)
samples = header.index("Warp Stall Sampling (All Samples)")
executed = header.index("Instructions Executed")
slice_runs = {36 * 64000 * 8, 35 * 64000 * 8}
parts = {"k-slice loop": 0.0, "per-tile code": 0.0, "the rest": 0.0}
for r in rows:
    runs, s = number(r[executed]), number(r[samples])
    if runs in slice_runs:
        parts["k-slice loop"] += s
    elif runs > 0 and runs % 512000 == 0:
        parts["per-tile code"] += s
    else:
        parts["the rest"] += s
total = sum(parts.values())
for name, s in parts.items():
    print("%-14s %5.1f%% of %d stall samples" % (name, 100.0 * s / total, total))
