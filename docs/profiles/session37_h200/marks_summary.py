"""Medians of each span between host_marks.patch's marks, per shape and case (marks_driver.py's stderr).

    python3 marks_summary.py marks.log OUT.json"""
import json, statistics, sys
got, case = {}, None
for line in open(sys.argv[1]):
    if line.startswith("CASE "):
        _, shape, name, kind = line.split()
        case = (shape, name) if kind == "timed" else None
    elif line.startswith("MARKS ") and case:
        for part in line[6:].strip().split(" | "):
            span, us = part.rsplit(" ", 1)
            got.setdefault(case, {}).setdefault(span, []).append(float(us))
out = {}
for (shape, name), spans in got.items():
    out.setdefault(shape, {})[name] = {k: {"median_us": statistics.median(v), "min_us": min(v), "max_us": max(v),
                                           "calls": len(v)} for k, v in spans.items()}
    print(shape, name)
    for k, s in out[shape][name].items():
        print("  %-44s %9.2f us (%.2f-%.2f, %d)" % (k, s["median_us"], s["min_us"], s["max_us"], s["calls"]))
json.dump(out, open(sys.argv[2], "w"), indent=1)
