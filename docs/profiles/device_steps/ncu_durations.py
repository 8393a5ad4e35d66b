"""ncu's gpu__time_duration.sum per kernel in an `ncu --metrics gpu__time_duration.sum` log: each kernel's name
(its template arguments and namespaces stripped), launches and summed µs. Run alone, it prints them longest first and
their total; session scripts import `durations`."""
import collections
import re
import sys

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


def kernel_name(signature):
    """`void ns::<unnamed>::name<T, 1>(args)` -> `name`."""
    name = re.sub(r"^void ", "", re.sub(r"\(.*", "", signature))
    while name.endswith(">"):  # the template arguments at the end, nested ones included
        depth, i = 0, len(name) - 1
        while i >= 0:
            depth += {">": 1, "<": -1}.get(name[i], 0)
            if depth == 0:
                break
            i -= 1
        name = name[:i]
    return name.split("::")[-1]


def durations(path):
    """kernel name -> [launches, µs], in the log's order of first launch."""
    total = collections.OrderedDict()
    name = None
    for line in open(path, errors="replace"):
        m = re.match(r"\s{2}(\S.*?) \(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)", line)
        if m:
            name = kernel_name(m.group(1))
            continue
        m = re.search(r"gpu__time_duration.sum\s+(\S+)\s+([\d.,]+)", line)
        if m and name:
            entry = total.setdefault(name, [0, 0.0])
            entry[0] += 1
            entry[1] += float(m.group(2).replace(",", "")) * UNITS.get(m.group(1), 1.0)
            name = None
    return total


if __name__ == "__main__":
    total = durations(sys.argv[1])
    for kernel, (_, us) in sorted(total.items(), key=lambda kv: -kv[1][1]):
        print("  %9.1f us  %s" % (us, kernel))
    print("  %9.1f us  all" % sum(us for _, us in total.values()))
