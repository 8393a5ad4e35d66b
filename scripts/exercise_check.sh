#!/usr/bin/env bash
# The exercises' own check, on a machine with a GPU:
#
#   scripts/exercise_check.sh [--build-dir DIR] [--arch ARCH]
#
# In a copy of the tree (the files git knows; the checkout is never changed),
# configured with -DCCE_EXERCISE=all, it builds every stage 01-10 and its
# exercise and runs, per stage, the stage's own two checks (the solution),
# the exercise's two checks as committed (blank: each must FAIL and print
# "exercise NN_name: ... is missing"), then the same with the solutions'
# blocks written into the exercises (scripts/exercise.py --solved: each must
# pass). Prints a table, one row per check, and exits 0 when every row is as
# expected, 1 when one is not, 77 when the checks were skipped (no usable GPU).
# --build-dir keeps the copy and its build (DIR/src, DIR/build) for the next
# run; by default a temporary folder, removed when all is as expected. --arch: the CUDA
# architecture (default: the GPU's, from nvidia-smi; else 80).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CCE_ROOT"

work=""
arch=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --build-dir) work="$2"; shift 2 ;;
    --arch) arch="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "exercise_check.sh: unknown argument '$1' (--build-dir DIR, --arch ARCH)" >&2; exit 2 ;;
  esac
done
if [ -z "$work" ]; then
  work="$(mktemp -d)"
  trap 'status=$?; if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "(the copy, its build and logs stay in $work)"; fi' EXIT
fi
mkdir -p "$work/src" "$work/build"
work="$(cd "$work" && pwd)"
if [ -z "$arch" ]; then
  arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. ' || true)"
  [ -n "$arch" ] || arch=80
fi

cce_find_nvcc
cce_report_gpu "the checks will be reported as skipped"
cce_section "copy of the tree in $work/src"
git ls-files -z -co --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$work/src"
python3 "$work/src/scripts/exercise.py" --check >/dev/null

stages=()
for folder in "$work"/src/stages/0[1-9]_* "$work"/src/stages/10_*; do
  stages+=("$(basename "$folder")")
done
targets=()
for s in "${stages[@]}"; do
  targets+=("stage${s}" "stage${s}_exercise")
done

cce_section "configure and build (CCE_EXERCISE=all, sm_$arch)"
cmake -S "$work/src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DCCE_EXERCISE=all >"$work/configure.log" 2>&1 || { tail -n 30 "$work/configure.log"; exit 1; }
ninja -C "$work/build" "${targets[@]}" >"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }

run_checks() { # $1: junit file, then ctest selection
  local junit="$1"
  shift
  ctest --test-dir "$work/build" --output-junit "$junit" "$@" >"$junit.log" 2>&1 || true
}
cce_section "the solutions' own checks"
run_checks "$work/solution.xml" -L stage -R '^stage(0[1-9]|10)_'
cce_section "the blank exercises (each check must fail with its message)"
run_checks "$work/blank.xml" -L exercise
cce_section "the exercises with the solutions' blocks written in (each check must pass)"
python3 "$work/src/scripts/exercise.py" --solved >/dev/null
ninja -C "$work/build" "${targets[@]}" >>"$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
run_checks "$work/solved.xml" -L exercise

python3 - "$work" <<'EOF'
import re
import sys
import xml.etree.ElementTree as ET

work = sys.argv[1]


def results(name):
    """test name -> (status, output): status passed, failed or skipped."""
    found = {}
    for case in ET.parse(f"{work}/{name}.xml").getroot().iter("testcase"):
        status = case.get("status", "run")
        if case.find("failure") is not None or status == "fail":
            status = "failed"
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            status = "skipped"
        else:
            status = "passed"
        out = case.find("system-out")
        found[case.get("name")] = (status, out.text or "" if out is not None else "")
    return found


solution, blank, solved = results("solution"), results("blank"), results("solved")
rows, bad, skipped = [], 0, 0
for test in sorted(blank):
    stage, check = re.match(r"exercise\.(\d\d_[a-z_]+)\.(\w+)$", test).groups()
    own = solution.get(f"stage{stage}.{check}", ("missing", ""))[0]
    b_status, b_out = blank[test]
    message = re.search(rf"exercise {stage}: (.*) is missing", b_out)
    b_cell = b_status + (f" ({message.group(1)} is missing)" if message else ", no message")
    s_status = solved.get(test, ("missing", ""))[0]
    if "skipped" in (own, b_status, s_status):
        verdict = "SKIPPED"
        skipped += 1
    elif own == "passed" and b_status == "failed" and message and s_status == "passed":
        verdict = "ok"
    else:
        verdict = "MISMATCH"
        bad += 1
    rows.append((stage, check, own, b_cell, s_status, verdict))
head = ("stage", "check", "solution", "blank exercise (must fail, with its message)", "solved exercise", "verdict")
widths = [max(len(str(r[k])) for r in rows + [head]) for k in range(len(head))]
for r in [head, tuple("-" * w for w in widths)] + rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
print()
if not rows:
    print("no exercise checks ran: see the ctest logs in", work)
    sys.exit(1)
if bad:
    print(f"{bad} of {len(rows)} checks not as expected (ctest logs: {work}/*.xml.log)")
    sys.exit(1)
if skipped:
    print(f"{skipped} of {len(rows)} checks skipped (no usable GPU): nothing was checked")
    sys.exit(77)
print(f"all {len(rows)} checks as expected: every solution passes, every blank exercise fails with its message, "
      "every solved exercise passes")
EOF
