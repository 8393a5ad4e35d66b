#!/usr/bin/env bash
# Builds everything and runs the tests:
#
#   scripts/test.sh [cmake configure args...] [-- ctest args...]
#
# Installs missing dependencies first (scripts/install-deps.sh), configures
# $BUILD_DIR (default build/) with Ninja in Release, builds with all cores and
# runs ctest; exits with ctest's status. ctest's full output goes to
# $BUILD_DIR/ctest.log; this prints the failing tests' output, the label
# summary, the skipped tests counted by reason (their list in
# $BUILD_DIR/skipped-tests.txt) and ctest's summary line, last. Without a GPU
# the GPU tests report SKIPPED. Environment: BUILD_DIR, CMAKE_CUDA_ARCHITECTURES (e.g. 86), CUDACXX.
# Works from any directory.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CCE_ROOT"

cmake_args=()
ctest_args=()
while [ "$#" -gt 0 ]; do
  if [ "$1" = "--" ]; then
    shift
    ctest_args=("$@")
    break
  fi
  cmake_args+=("$1")
  shift
done

cce_section "dependencies"
bash "$CCE_ROOT/scripts/install-deps.sh"
cce_find_nvcc # puts /usr/local/cuda/bin on PATH when nvcc is only there
cce_report_gpu "the GPU tests will be reported as skipped"

cce_configure_and_build ${cmake_args[@]+"${cmake_args[@]}"}

log="$BUILD_DIR/ctest.log"
skipped_list="$BUILD_DIR/skipped-tests.txt"
rm -f "$skipped_list" # a list from an earlier run must not be taken for this one's
cce_section "test: ctest --test-dir $BUILD_DIR --output-on-failure --no-tests=error${ctest_args[*]+ ${ctest_args[*]}}"
cce_say "(ctest's full output goes to $log)"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error ${ctest_args[@]+"${ctest_args[@]}"} >"$log" 2>&1 ||
  status=$?

# The skipped tests, each with the reason its output gives: the line after
# "SKIPPED: " (stage executables, scripts/compare_with_pytorch.py) or the
# message under GoogleTest's "Skipped" (its last ": "-separated part, e.g.
# "no CUDA device: no CUDA GPU found" gives "no CUDA GPU found"). ctest's
# console output names the skipped tests; Testing/Temporary/LastTest.log holds
# every test's output.
skip_reasons() {
  local last_test="$BUILD_DIR/Testing/Temporary/LastTest.log"
  [ -f "$last_test" ] || last_test=/dev/null
  awk '
    FNR == NR {
      if (match($0, /^[0-9]+\/[0-9]+ Testing: /)) { name = substr($0, RLENGTH + 1); after_skip = 0; next }
      if ($0 == "Output:") { in_output = 1; next }
      if ($0 == "<end of output>") { in_output = 0; next }
      if (!in_output || name == "" || (name in reason)) next
      if ((i = index($0, "SKIPPED: ")) > 0) { reason[name] = substr($0, i + 9); next }
      if (after_skip && $0 != "") {
        r = $0
        while ((i = index(r, ": ")) > 0) r = substr(r, i + 2)
        reason[name] = r
        next
      }
      if ($0 ~ /: Skipped$/) after_skip = 1
      next
    }
    /^The following tests did not run:/ { in_list = 1; next }
    in_list && /\(Skipped\)$/ {
      line = $0
      sub(/^[ \t]*[0-9]+ - /, "", line)
      sub(/ \(Skipped\)$/, "", line)
      r = (line in reason) ? reason[line] : "no reason printed (see the test output in " FILENAME ")"
      printf "%s\t%s\n", r, line
      next
    }
    in_list && !/^[ \t]/ { in_list = 0 }
  ' "$last_test" "$log"
}

# Quiet summary: failing tests with their output, what ran per label, the
# skipped tests counted by reason, and ctest's closing lines verbatim, its
# "N% tests passed, M tests failed out of K" line last (CI reads that line).
mapfile -t skipped < <(skip_reasons)
if [ "${#skipped[@]}" -gt 0 ]; then
  printf '%s\n' "${skipped[@]}" | awk -F '\t' '{ printf "%s  [%s]\n", $2, $1 }' >"$skipped_list"
fi
awk '
  /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / { show = ($0 ~ /\*\*\*|Not Run/ && $0 !~ /\*\*\*Skipped/) }
  /^ +Start +[0-9]+: / { show = 0; next }
  /^[0-9]+% tests passed/ { show = 0; summary = $0; next }
  /^Label Time Summary:/ { in_labels = 1 }
  /^Total Test time/ { total = $0 }
  /^The following tests FAILED:/ { in_failed = 1 }
  /^Errors while running CTest/ { in_failed = 0 }
  show { print }
  in_labels { print; if ($0 == "") in_labels = 0 }
  in_failed { failed = failed $0 "\n" }
  END {
    if (failed != "") printf "%s", failed
    if (total != "") print total
  }
' "$log"
if [ "${#skipped[@]}" -gt 0 ]; then
  printf '%s\n' "${skipped[@]}" | cut -f 1 | sort | uniq -c | sort -rn |
    while read -r count reason; do
      noun="tests"
      [ "$count" = 1 ] && noun="test"
      cce_say "$count $noun skipped: $reason; list in $skipped_list"
    done
fi
summary_line="$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)"
if [ -n "$summary_line" ]; then
  printf '%s\n' "$summary_line"
else
  cce_say "ctest printed no summary (status $status); the end of $log:"
  tail -n 20 "$log"
fi
exit "$status"
