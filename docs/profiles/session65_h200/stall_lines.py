"""The instructions with the most stall samples in an `ncu --page source --csv --print-source sass` export: the 40
largest by "Warp Stall Sampling (All Samples)", with their share of all samples, their address and SASS. Usage:
python3 stall_lines.py EXPORT.csv[.gz]. stall_regions.py reads the export through read_export."""
import csv
import gzip
import sys


def number(text):
    """A counter of the export ("1,234", or empty for none) as a float."""
    return float((text or "0").replace(",", ""))


def read_export(path):
    """The export's column names and its instruction rows (the lines after the header that have every column)."""
    opener = gzip.open if path.endswith(".gz") else open
    rows = list(csv.reader(opener(path, "rt", errors="replace")))
    header_at = next(i for i, r in enumerate(rows) if any(c.startswith("Warp Stall Sampling (All") for c in r))
    header = rows[header_at]
    return header, [r for r in rows[header_at + 1:] if len(r) == len(header)]


if __name__ == "__main__":
    header, rows = read_export(sys.argv[1])
    print("columns:", " | ".join(header[:12]))
    samples = header.index("Warp Stall Sampling (All Samples)")
    source, address = header.index("Source"), header.index("Address")
    body = [(number(r[samples]), r) for r in rows]
    total = sum(s for s, _ in body) or 1.0
    print("instructions %d, stall samples %d" % (len(body), total))
    for s, r in sorted(body, key=lambda x: -x[0])[:40]:
        print("%6.2f%%  %s  %s" % (100.0 * s / total, r[address], r[source][:110]))
