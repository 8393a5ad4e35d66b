#!/usr/bin/env bash
# A class's own run on its GPU, in one command:
#
#   bench/class_run.sh [--shapes=gpt2,llama3,gemma2,gemma2_flat] [--quick] [--out-dir=docs]
#
#   1. builds for this GPU (cmake -S . -B $BUILD_DIR, default build/, with
#      CMAKE_CUDA_ARCHITECTURES from nvidia-smi unless it is set),
#   2. runs the GPU tests (ctest -L "gpu|stage" -LE pytorch: the stages
#      against the CPU reference, the GPU suite), their output in
#      $BUILD_DIR/class_ctest.log; a failure is reported and the run goes on,
#   3. runs the benchmarks: $BUILD_DIR/bench/cce_bench --shapes=... (the
#      cuBLAS floor and every stage, loss and loss+grad) into
#      $BUILD_DIR/class_bench.json,
#   4. writes the results page for this GPU beside ours, with
#      bench/class_compare.py: docs/results_<gpu>.md, its benchmark file
#      docs/bench_<gpu>_<commit>.json and its figure docs/figures/class_<gpu>.png.
#      The page names the GPU, sets every case beside our H100 run (and our
#      sm_80-path run on an H100, on a GPU of compute capability 8.x), and flags
#      where the two differ by more than the run-to-run spread.
#
# --shapes: cce_bench's shapes (default gpt2,llama3,gemma2,gemma2_flat: those of
# ours that need no trained-model data); --quick: the short run: builds only
# the stage executables and cce_bench (not the GPU test suite), runs only the
# stages' own checks (ctest -L stage) in step 2, and benchmarks gpt2 only, 15
# timed calls per case; --out-dir: where the page and its files go.
# Exits 77 with one line when no GPU is visible, 1 when the GPU tests failed
# (after writing the page, which says so), else 0.
# Environment: BUILD_DIR, CMAKE_CUDA_ARCHITECTURES, CTEST_JOBS (default 4), CUDACXX, PYTHON (default
# /usr/bin/python3 when it has matplotlib, else python3). Works from any directory.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$CCE_ROOT"
BUILD_DIR="${BUILD_DIR:-build}"

shapes="gpt2,llama3,gemma2,gemma2_flat"
out_dir="docs"
bench_args=()
test_labels="gpu|stage"
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes=*) shapes="${1#--shapes=}" ;;
    --quick)
      shapes="gpt2"
      bench_args+=(--calls=15)
      test_labels="stage"
      export CCE_BUILD_TARGETS="cce_stages cce_bench"
      ;;
    --out-dir=*) out_dir="${1#--out-dir=}" ;;
    -h | --help)
      cce_usage "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) cce_die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done
[ -n "$shapes" ] || cce_die "--shapes is empty"
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  if /usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1; then PYTHON=/usr/bin/python3; fi
fi

cce_section "GPU"
cce_report_gpu "the class's run needs one"
if [ "$CCE_GPU_VISIBLE" -ne 1 ]; then
  echo "class_run.sh: SKIPPED: no GPU visible (run it on the class's GPU machine)"
  exit 77
fi
if [ -z "${CMAKE_CUDA_ARCHITECTURES:-}" ]; then
  CMAKE_CUDA_ARCHITECTURES="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '. ')"
  export CMAKE_CUDA_ARCHITECTURES
fi

# 1. Build.
cce_find_nvcc
cce_configure_and_build

# 2. The GPU tests.
tests_log="$BUILD_DIR/class_ctest.log"
tests_what="ctest -L \"$test_labels\" -LE pytorch"
[ "$test_labels" = "stage" ] && tests_what="the stages' own checks, $tests_what (--quick)"
cce_section "GPU tests: $tests_what (output in $tests_log)"
tests_status=0
ctest --test-dir "$BUILD_DIR" -L "$test_labels" -LE pytorch --output-on-failure -j "${CTEST_JOBS:-4}" >"$tests_log" 2>&1 || tests_status=$?
grep -E '^[0-9]+% tests passed' "$tests_log" | tail -n 1 || cce_say "ctest printed no summary: see $tests_log"

# 3. The benchmarks.
bench_json="$BUILD_DIR/class_bench.json"
cmd=("$BUILD_DIR/bench/cce_bench" "--shapes=$shapes" "--benchmark_out=$bench_json" --benchmark_out_format=json
  ${bench_args[@]+"${bench_args[@]}"})
cce_section "benchmarks: ${cmd[*]}"
"${cmd[@]}"

# 4. The page.
cmd=("$PYTHON" bench/class_compare.py "$bench_json" --out-dir "$out_dir" --ctest-log "$tests_log" --ctest-what "$tests_what")
cce_section "page: ${cmd[*]}"
"${cmd[@]}"

if [ "$tests_status" -ne 0 ]; then
  cce_say "the GPU tests failed (ctest exit status $tests_status): see $tests_log; the page says so"
  exit 1
fi
