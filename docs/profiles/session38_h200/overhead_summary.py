"""One line per shape from python/op_overhead_probe.py's JSON: the op (and its Python path, where the C++ call's
library is built) against the C call, synchronized and queued; the split's prefix.

    python3 overhead_summary.py OUT.json"""
import json, sys
d = json.load(open(sys.argv[1]))
print("eager call library:", d.get("eager_op_library"))
for shape, s in d["shapes"].items():
    c = s["c_call"]["gpu_ms_median"]
    q = s["queued"]; qa = q["ahead_alone"]["gpu_ms_median"]; qc = q["c_call"]["gpu_ms_median"] - qa
    parts = ["%s: C call %.3f ms (%.3f..%.3f)" % (shape, c, s["c_call"]["gpu_ms_min"], s["c_call"]["gpu_ms_max"])]
    for case in ("op_with_backward", "op_python_path"):
        if case in s:
            o = s[case]["gpu_ms_median"]; qo = q[case]["gpu_ms_median"] - qa
            parts.append("%s %.3f (%+.1f%%; queued %+.1f%%)" % (case, o, 100 * (o / c - 1), 100 * (qo / qc - 1)))
    sp = s["split"]
    parts.append("split prefix " + ", ".join("%s %.1f us" % (k, 1e3 * v["prefix_ms"]) for k, v in sp.items()))
    print("; ".join(parts))
