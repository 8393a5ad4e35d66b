"""One line per shape of an op_overhead_probe.py JSON: the C call and the op with backward, synchronized and queued
(the spin ahead subtracted), and the op's split (prefix: host time before the C call; after: GPU time the host's work
after the C call adds). python3 overhead_line.py OUT.json"""
import json, sys

shapes = json.load(open(sys.argv[1]))["shapes"]
for shape in ("gemma2", "lm32k"):
    s = shapes[shape]
    q = s["queued"]
    ahead = q["ahead_alone"]["gpu_ms_median"]
    call, op = s["c_call"]["gpu_ms_median"], s["op_with_backward"]["gpu_ms_median"]
    q_call, q_op = q["c_call"]["gpu_ms_median"] - ahead, q["op_with_backward"]["gpu_ms_median"] - ahead
    split = s["split"]["op_with_backward"]
    print("  %-7s c_call %.3f op %.3f (%+.1f%%)  queued: c_call %.3f op %.3f (%+.1f%%)  split op: prefix %.3f after %.3f"
          % (shape, call, op, 100 * (op / call - 1), q_call, q_op, 100 * (q_op / q_call - 1), split["prefix_ms"],
             split["after_call_ms"]))
