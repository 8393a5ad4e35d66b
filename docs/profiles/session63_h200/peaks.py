"""Prints each cce_bench JSON's medians with their peak MB: one line per (file, benchmark)."""
import json
import os
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        runs = json.load(f)["benchmarks"]
    for run in runs:
        if run["name"].endswith("_median"):
            print("%-22s %-55s %9.3f ms  peak %10.3f MB" % (os.path.basename(path), run["name"].split("/iterations")[0],
                                                          run["real_time"], run.get("peak_MB", float("nan"))))
