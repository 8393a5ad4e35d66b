#!/usr/bin/env bash
# Builds everything and runs the tests:
#
#   scripts/test.sh [cmake configure args...] [-- ctest args...]
#
# Installs missing dependencies first (scripts/install-deps.sh), configures
# $BUILD_DIR (default build/) with Ninja in Release, builds with all cores and
# runs ctest; exits with ctest's status. Without a GPU the GPU tests report
# SKIPPED. Environment: BUILD_DIR, CMAKE_CUDA_ARCHITECTURES (e.g. 86), CUDACXX.
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

cce_section "test: ctest --test-dir $BUILD_DIR --output-on-failure ${ctest_args[*]+${ctest_args[*]}}"
status=0
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error ${ctest_args[@]+"${ctest_args[@]}"} || status=$?
if [ "$status" -eq 0 ] && [ "$CCE_GPU_VISIBLE" = 1 ]; then
  cce_say "test.sh: the tests passed"
elif [ "$status" -eq 0 ]; then
  cce_say "test.sh: the tests passed; without a GPU the GPU tests were skipped (listed above under 'The following tests did not run')"
else
  cce_say "test.sh: ctest exited with status $status"
fi
exit "$status"
