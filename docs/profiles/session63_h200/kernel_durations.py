"""Sums ncu's gpu__time_duration.sum per kernel name over one `ncu --metrics gpu__time_duration.sum` log (every
launch of one call); prints the longest first, in µs, and the total."""
import collections
import re
import sys

total = collections.OrderedDict()
name = None
for line in open(sys.argv[1]):
    m = re.match(r"\s{2}(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
    if m:
        name = re.sub(r"^void ", "", re.sub(r"\(.*", "", m.group(1)))
        while name.endswith(">"):  # the template arguments at the end, nested ones included
            depth, i = 0, len(name) - 1
            while i >= 0:
                depth += {">": 1, "<": -1}.get(name[i], 0)
                if depth == 0:
                    break
                i -= 1
            name = name[:i]
        name = name.split("::")[-1]
        continue
    m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
    if m and name:
        value = float(m.group(2).replace(",", ""))
        value = value / 1000 if m.group(1) == "ns" else (value * 1000 if m.group(1) == "ms" else value)
        total[name] = total.get(name, 0.0) + value
        name = None
for kernel, us in sorted(total.items(), key=lambda kv: -kv[1]):
    print("  %9.1f us  %s" % (us, kernel))
print("  %9.1f us  all" % sum(total.values()))
