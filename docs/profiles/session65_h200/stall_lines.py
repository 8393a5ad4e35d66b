"""The instructions with the most stall samples in an `ncu --page source --csv --print-source sass` export: the 40
largest by "Warp Stall Sampling (All Samples)", with their share of all samples, their opcode and, where the export
has it, the source line. Usage: python3 stall_lines.py EXPORT.csv[.gz]"""
import csv
import gzip
import sys

opener = gzip.open if sys.argv[1].endswith(".gz") else open
rows = list(csv.reader(opener(sys.argv[1], "rt", errors="replace")))
header_at = next(i for i, r in enumerate(rows) if any("Warp Stall Sampling (All" in c for c in r))
header = rows[header_at]
print("columns:", " | ".join(header[:12]))
samples = next(i for i, c in enumerate(header) if c.startswith("Warp Stall Sampling (All"))
source = next((i for i, c in enumerate(header) if c.lower() == "source"), 1)
address = next((i for i, c in enumerate(header) if c.lower() == "address"), 0)
body = []
for r in rows[header_at + 1:]:
    try:
        body.append((float(r[samples].replace(",", "") or 0), r))
    except (ValueError, IndexError):
        continue
total = sum(s for s, _ in body) or 1.0
print("instructions %d, stall samples %d" % (len(body), total))
for s, r in sorted(body, key=lambda x: -x[0])[:40]:
    print("%6.2f%%  %s  %s" % (100.0 * s / total, r[address], r[source][:110]))
