#!/usr/bin/env bash
# Makes sure the build and test dependencies are present on a Debian or Ubuntu
# machine that has the CUDA toolkit. Safe to run again: when everything is
# there it prints one line and exits 0.
#
#   - Debian packages (below): missing ones are installed with apt-get, as
#     root, or through sudo when sudo works without a password or can ask for
#     one on this terminal; otherwise it prints the exact command and exits 1.
#   - the CUDA toolkit: $CUDACXX, nvcc on PATH, or /usr/local/cuda/bin/nvcc;
#     it is never installed from here (get it from NVIDIA).
#   - a C++ compiler ($CXX or g++) and a recent enough cmake.
#
# CCE_SKIP_PACKAGES=1 skips the Debian package step (other distributions,
# where you have installed the equivalents yourself).
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# The Python packages run the notebooks headless (notebooks/run_notebook.py,
# nbclient): they are not Jupyter's UI, and there is no `jupyter` command
# (apt-get install jupyter-notebook for that).
PACKAGES=(
  cmake g++ ninja-build
  libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-numpy python3-matplotlib
  python3-nbconvert python3-nbclient python3-nbformat python3-ipykernel
)

# Prints the packages of "$@" that dpkg does not have installed.
missing_packages() {
  local p status
  for p in "$@"; do
    # shellcheck disable=SC2016  # ${...} is dpkg-query's format, not the shell's
    status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
    if [ "$status" != "installed" ]; then
      printf '%s\n' "$p"
    fi
  done
}

# How apt-get can run as root here: "root", "sudo", or "none".
root_access() {
  if cce_is_root; then
    echo root
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    echo sudo
  elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
    echo sudo # sudo will ask for the password on this terminal
  else
    echo none
  fi
}

# The command a person should run to install "$@" themselves.
install_command() {
  local prefix=""
  if ! cce_is_root && command -v sudo >/dev/null 2>&1; then
    prefix="sudo "
  fi
  printf '%sapt-get update && %sapt-get install -y --no-install-recommends %s' "$prefix" "$prefix" "$*"
}

PACKAGES_NOTE="${#PACKAGES[@]} Debian packages present (compilers, libraries, Python to run the notebooks without Jupyter)"

ensure_packages() {
  if [ "${CCE_SKIP_PACKAGES:-0}" = 1 ]; then
    PACKAGES_NOTE="Debian package check skipped (CCE_SKIP_PACKAGES=1)"
    return 0
  fi
  if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    cce_say "install-deps: no apt-get/dpkg here, so this is not Debian or Ubuntu and nothing is installed."
    cce_say "Install the equivalents of these Debian packages with your package manager:"
    cce_say "  ${PACKAGES[*]}"
    cce_say "then run again with CCE_SKIP_PACKAGES=1."
    exit 1
  fi

  local missing
  mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi

  cce_say "install-deps: missing Debian packages: ${missing[*]}"
  local access
  access="$(root_access)"
  local as_root=()
  case "$access" in
    root) ;;
    sudo)
      cce_say "install-deps: installing them with sudo"
      as_root=(sudo)
      ;;
    *)
      if command -v sudo >/dev/null 2>&1; then
        cce_say "install-deps: not root, and sudo needs a password but there is no terminal to ask on."
      else
        cce_say "install-deps: not root, and there is no sudo."
      fi
      cce_say "Run this as root (or with sudo), then run this script again:"
      cce_say "  $(install_command "${missing[@]}")"
      exit 1
      ;;
  esac

  # (${a[@]+"${a[@]}"}: an empty array is "unbound" under set -u in bash < 4.4)
  ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q update
  ${as_root[@]+"${as_root[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -q install -y --no-install-recommends "${missing[@]}"

  mapfile -t missing < <(missing_packages "${PACKAGES[@]}")
  if [ "${#missing[@]}" -ne 0 ]; then
    cce_die "install-deps: still missing after apt-get install: ${missing[*]}"
  fi
  cce_say "install-deps: installed the missing packages"
}

ensure_cxx() {
  local cxx="${CXX:-g++}"
  if ! command -v "$cxx" >/dev/null 2>&1; then
    cce_die "no C++ compiler: '$cxx' is not on PATH (install g++, or set CXX=/path/to/compiler)"
  fi
  CXX_VERSION="$("$cxx" -dumpfullversion -dumpversion 2>/dev/null | head -n 1)"
  CXX_NAME="$cxx"
}

ensure_cmake() {
  command -v cmake >/dev/null 2>&1 || cce_die "cmake is not on PATH (install the cmake package)"
  local need have
  need="$(sed -n 's/^cmake_minimum_required(VERSION \([0-9.]*\).*/\1/p' "$CCE_ROOT/CMakeLists.txt" | head -n 1)"
  have="$(cmake --version | sed -n 's/^cmake version \([0-9][0-9.]*\).*/\1/p' | head -n 1)"
  if [ -n "$need" ] && [ -n "$have" ] &&
    [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]; then
    cce_die "cmake $have is older than the $need this project needs (Ubuntu 22.04 ships 3.22): get a newer one, e.g. 'pip install cmake' or from https://apt.kitware.com"
  fi
  CMAKE_VERSION="$have"
}

ensure_nvcc() {
  cce_find_nvcc || exit 1
  NVCC_VERSION="$(cce_nvcc_version "$CCE_NVCC")"
  case "$NVCC_VERSION" in
    "" | [0-9].* | 1[01].*)
      cce_say "install-deps: warning: $CCE_NVCC reports CUDA '${NVCC_VERSION:-unknown}'; this project is built with CUDA 12.x or 13.x"
      ;;
  esac
}

# The CUDA toolkit first: it is the one thing this script cannot install.
ensure_nvcc
ensure_packages
ensure_cxx
ensure_cmake
cce_say "install-deps: ok: $PACKAGES_NOTE; nvcc ${NVCC_VERSION:-?} ($CCE_NVCC); $CXX_NAME $CXX_VERSION; cmake $CMAKE_VERSION"
