#!/usr/bin/env bash
# How session 51 packed QuACK's packages for the device (here, after ../shared/tools/quack-wheels.sh .quack-wheels):
# the wheels unpacked into one folder, that folder as one tar.xz (63 MiB), split in three parts of 21 MiB, so that
# each fits beside the 40 MiB tree in a call's 64. Calls 1-3 carry .quack-wheels/xz.00, .01, .02 in turn (each
# copies its part to /tmp/q/); the third joins them: cat /tmp/q/xz.00 /tmp/q/xz.01 .quack-wheels/xz.02 > site.tar.xz,
# then python3 -m tarfile -e site.tar.xz /tmp/qsite (8 s) and PYTHONPATH=/tmp/qsite:/tmp/qsite/nvidia_cutlass_dsl/dsl_packages.
set -euo pipefail
w=${1:-.quack-wheels}
tmp=$(mktemp -d)
cat "$w/cu13.00" "$w/cu13.01" > "$tmp/cu13.whl"
for f in "$tmp/cu13.whl" "$w"/rest/*.whl; do python3 -m zipfile -e "$f" "$tmp/site"; done
tar cf - -C "$tmp/site" . | xz -9e -T2 > "$tmp/site.tar.xz"
split -n 3 -d "$tmp/site.tar.xz" "$w/xz."
rm -rf "$tmp"
ls -l "$w"/xz.*
