"""The kept-tile kernels' summed ncu durations in a stage 10 log at llama3's shape with every pair kept, and their
TFLOP/s at 2·128·128·D per kept pair and product (64120 of 64128 pairs kept: session 31)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "device_steps"))
from ncu_durations import durations  # noqa: E402

flop = 2 * 128 * 128 * 4096 * 64120
for k, (n, us) in durations(sys.argv[1]).items():
    if k in ("recompute_kept_kernel", "dc_products_bf16", "de_products_bf16"):
        print("  %-22s %4d launches %10.1f us %6.0f TFLOP/s" % (k, n, us, flop / us / 1e6))
