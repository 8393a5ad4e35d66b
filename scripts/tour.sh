#!/usr/bin/env bash
# Builds everything and runs the tour:
#
#   scripts/tour.sh [cce_tour args...]
#   scripts/tour.sh --help     # usage, without installing or building anything
#
# Installs missing dependencies first (scripts/install-deps.sh), configures
# $BUILD_DIR (default build/) with Ninja in Release, builds with all cores, then
# runs $BUILD_DIR/stages/cce_tour with the given arguments: every stage on one
# problem (by default N=2048 D=2304 V=256000; --n --d --v to change it), in one
# comparison table. Without a GPU the tour says so and prints the memory each
# stage would need for that problem instead.
# Environment: BUILD_DIR, CMAKE_CUDA_ARCHITECTURES (e.g. 86), CUDACXX.
# Works from any directory.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$CCE_ROOT"

# --help answers at once: no install, no build. The tour's own flag list
# needs the built tour, so it follows only when one is there.
for arg in "$@"; do
  if [ "$arg" = "--help" ] || [ "$arg" = "-h" ]; then
    cat <<'USAGE'
usage: scripts/tour.sh [cce_tour flags...]

Installs missing dependencies (scripts/install-deps.sh), configures and
builds $BUILD_DIR (default build/), then runs every stage on one problem and
prints one comparison table: loss, error against the CPU reference, time and
peak device memory per stage. Without a GPU it prints the memory each stage
would need instead.

cce_tour flags: --n --d --v (the problem), --dtype bf16|fp32,
--data random|realistic, --seed, --iters, --memory-model (only the memory
table), --help.
Environment: BUILD_DIR, CMAKE_CUDA_ARCHITECTURES (e.g. 86), CUDACXX,
CCE_SKIP_PACKAGES=1 (no apt-get).
USAGE
    tour="$BUILD_DIR/stages/cce_tour"
    if [ -x "$tour" ]; then
      printf '\n'
      "$tour" --help
    else
      printf '\n(%s is not built yet: the full flag list comes from its --help.)\n' "$tour"
    fi
    exit 0
  fi
done

cce_section "dependencies"
bash "$CCE_ROOT/scripts/install-deps.sh"
cce_find_nvcc # puts /usr/local/cuda/bin on PATH when nvcc is only there

# shellcheck disable=SC2119  # the script's arguments are the tour's, not cmake's
cce_configure_and_build

tour="$BUILD_DIR/stages/cce_tour"
if [ ! -x "$tour" ]; then
  cce_die "the build did not produce $tour (is it added in stages/CMakeLists.txt?)"
fi
cce_section "tour: $tour $*"
exec "$tour" "$@"
