# Shared by scripts/install-deps.sh, scripts/test.sh and scripts/tour.sh: source it, don't run it.
#
# Sets CCE_ROOT (the repository root, found from this file's own path) and
# BUILD_DIR (default build/, relative to the root unless absolute).
# shellcheck shell=bash
# shellcheck disable=SC2034  # CCE_NVCC and friends are read by the scripts that source this

CCE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
BUILD_DIR="${BUILD_DIR:-build}"

cce_say() { printf '%s\n' "$*"; }
cce_die() {
  printf 'error: %s\n' "$*" >&2
  exit 1
}
cce_section() { printf '\n==> %s\n' "$*"; }
# A script's usage: its header comment, from line 2 to `set -euo pipefail`.
cce_usage() { sed -n '2,/^set -euo/p' "$1" | sed '$d; s/^# \{0,1\}//'; }

cce_is_root() { [ "$(id -u)" -eq 0 ]; }

cce_nproc() { nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2; }

# Finds the CUDA compiler: $CUDACXX if set, else nvcc on PATH, else
# /usr/local/cuda/bin/nvcc (then /usr/local/cuda/bin is put on PATH, exported,
# so that CMake finds it too). Sets CCE_NVCC; returns 1 with a message if none.
cce_find_nvcc() {
  CCE_NVCC=""
  if [ -n "${CUDACXX:-}" ]; then
    if [ -x "$CUDACXX" ] || command -v "$CUDACXX" >/dev/null 2>&1; then
      CCE_NVCC="$CUDACXX"
      return 0
    fi
    printf 'error: CUDACXX=%s is not an executable CUDA compiler\n' "$CUDACXX" >&2
    return 1
  fi
  if command -v nvcc >/dev/null 2>&1; then
    CCE_NVCC="$(command -v nvcc)"
    return 0
  fi
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    PATH="/usr/local/cuda/bin:$PATH"
    export PATH
    CCE_NVCC=/usr/local/cuda/bin/nvcc
    return 0
  fi
  printf 'error: the CUDA toolkit (nvcc) was not found: install CUDA 12.x or 13.x from NVIDIA, or set CUDACXX=/path/to/nvcc\n' >&2
  return 1
}

# "13.0" from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88").
cce_nvcc_version() {
  "$1" --version 2>/dev/null | sed -n 's/.*release \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1
}

# Prints whether nvidia-smi sees a GPU, with $1 as the consequence when none.
# The tests decide for themselves (they ask the CUDA runtime); this is only the
# heads-up.
# Sets CCE_GPU_VISIBLE to 1 or 0.
cce_report_gpu() {
  local gpus=""
  CCE_GPU_VISIBLE=0
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpus="$(nvidia-smi -L 2>/dev/null || true)"
  fi
  if [ -n "$gpus" ]; then
    CCE_GPU_VISIBLE=1
    cce_say "GPU visible (nvidia-smi -L):"
    printf '%s\n' "$gpus" | sed 's/^/  /'
  elif command -v nvidia-smi >/dev/null 2>&1; then
    cce_say "no GPU visible (nvidia-smi -L lists none): $1"
  else
    cce_say "no GPU visible (no nvidia-smi on PATH): $1"
  fi
}

# Configures (Ninja, Release) and builds everything in $BUILD_DIR with all cores
# (only the targets in $CCE_BUILD_TARGETS, space-separated, when it is set).
# Arguments are extra `cmake` configure arguments. $CMAKE_CUDA_ARCHITECTURES
# from the environment, when set, is passed on as -DCMAKE_CUDA_ARCHITECTURES.
cce_configure_and_build() {
  local args=(-S "$CCE_ROOT" -B "$BUILD_DIR")
  if [ -f "$BUILD_DIR/CMakeCache.txt" ]; then
    # An existing build directory keeps its generator (CMake refuses to switch).
    local generator
    generator="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$BUILD_DIR/CMakeCache.txt")"
    if [ -n "$generator" ] && [ "$generator" != "Ninja" ]; then
      cce_say "note: $BUILD_DIR/ was configured with \"$generator\", so it stays that way (delete it to get Ninja)"
    fi
  else
    args+=(-G Ninja)
  fi
  args+=(-DCMAKE_BUILD_TYPE=Release)
  if [ -n "${CMAKE_CUDA_ARCHITECTURES:-}" ]; then
    args+=("-DCMAKE_CUDA_ARCHITECTURES=$CMAKE_CUDA_ARCHITECTURES")
  fi
  args+=("$@")

  cce_section "configure: cmake ${args[*]}"
  cmake "${args[@]}"
  local jobs
  jobs="$(cce_nproc)"
  local targets=()
  if [ -n "${CCE_BUILD_TARGETS:-}" ]; then
    read -r -a targets <<<"$CCE_BUILD_TARGETS"
    targets=(--target "${targets[@]}")
  fi
  cce_section "build: cmake --build $BUILD_DIR -j $jobs${targets[*]:+ ${targets[*]}}"
  cmake --build "$BUILD_DIR" -j "$jobs" ${targets[@]+"${targets[@]}"}
}
