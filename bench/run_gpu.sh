#!/usr/bin/env bash
# Every benchmark on a GPU machine, in one command:
#
#   bench/run_gpu.sh [--shapes=small,gpt2,llama3,gemma2,lm32k,lm128k] [--lm-data=DIR]
#                    [-- extra cce_bench flags]
#
#   1. builds (cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release; a
#      CMAKE_PREFIX_PATH from the environment is passed on),
#   2. writes the inputs of each generated shape (small, gpt2, llama3, gemma2:
#      bf16-rounded, realistic, seed 1234) with build/stages/stage01_materialized
#      --save into $INPUTS/<shape> (default /tmp/cce-inputs; a shape whose files
#      are there is kept). The trained-model shapes lm32k and lm128k are never
#      written here: their inputs come from bench/lm_data.py, in --lm-data
#      (default $LM_DATA, else /tmp/cce-lm-data); asking for one whose files
#      are missing stops with the command that makes them,
#   3. runs the C++ benchmark: build/bench/cce_bench -> docs/bench_cpp.json,
#   4. runs the peers (PyTorch, torch.compile, Cut Cross-Entropy, Liger-Kernel):
#      python3 bench/peers.py -> docs/bench_peers.json, with floor ratios
#      from docs/bench_cpp.json,
#   5. regenerates docs/results.md with bench/results_table.py from its list
#      of committed files (the newest run of each case wins).
#
# --shapes and --lm-data go to every step. The default shapes are the four
# generated ones, and lm32k, lm128k when their files are in --lm-data. Needs a
# GPU, and PyTorch for step 4 (see the top of bench/peers.py for installing the
# peers' wheels without internet; set PYTHONPATH=/tmp/site here if you
# installed them there).
# Environment: INPUTS, LM_DATA, CMAKE_PREFIX_PATH, CMAKE_CUDA_ARCHITECTURES
# (e.g. 86), CUDACXX, PYTHON (default python3). Works from any directory.
set -euo pipefail

# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib.sh"
cd "$CCE_ROOT"
BUILD_DIR=build

shapes=""
lm_data="${LM_DATA:-/tmp/cce-lm-data}"
bench_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --shapes=*)
      shapes="${1#--shapes=}"
      [ -n "$shapes" ] || cce_die "--shapes is empty"
      ;;
    --shapes)
      [ $# -ge 2 ] || cce_die "--shapes needs a value"
      shapes="$2"
      [ -n "$shapes" ] || cce_die "--shapes is empty"
      shift
      ;;
    --lm-data=*) lm_data="${1#--lm-data=}" ;;
    --lm-data)
      [ $# -ge 2 ] || cce_die "--lm-data needs a value"
      lm_data="$2"
      shift
      ;;
    --)
      shift
      bench_args=("$@")
      break
      ;;
    -h | --help)
      cce_usage "${BASH_SOURCE[0]}"
      exit 0
      ;;
    *) cce_die "unknown argument '$1' (try --help)" ;;
  esac
  shift
done

INPUTS="${INPUTS:-/tmp/cce-inputs}"
PYTHON="${PYTHON:-python3}"
[ -n "$lm_data" ] || cce_die "--lm-data is empty"

# N D V of each generated shape (the same as in bench/cce_bench.cpp and bench/peers.py).
shape_dims() {
  case "$1" in
    small) echo "4096 2304 32000" ;;
    gpt2) echo "20480 768 50257" ;;
    llama3) echo "8192 4096 128256" ;;
    gemma2) echo "8192 2304 256000" ;;
    *) return 1 ;;
  esac
}
is_lm_shape() { [ "$1" = lm32k ] || [ "$1" = lm128k ]; }
lm_files_present() { [ -f "$lm_data/$1/e.npy" ] && [ -f "$lm_data/$1/c.npy" ] && [ -f "$lm_data/$1/targets.npy" ]; }

if [ -z "$shapes" ]; then
  shapes="small,gpt2,llama3,gemma2"
  for shape in lm32k lm128k; do
    if lm_files_present "$shape"; then shapes="$shapes,$shape"; fi
  done
fi
IFS=, read -r -a shape_list <<<"$shapes"
[ "${#shape_list[@]}" -gt 0 ] || cce_die "--shapes is empty"
for shape in "${shape_list[@]}"; do
  if is_lm_shape "$shape"; then
    lm_files_present "$shape" ||
      cce_die "no trained-model data for $shape in $lm_data/$shape: make it with" \
        "python3 bench/lm_data.py --out $lm_data --only $shape (on this GPU machine; see bench/README.md)"
  else
    shape_dims "$shape" >/dev/null ||
      cce_die "unknown shape '$shape' (known: small, gpt2, llama3, gemma2, lm32k, lm128k)"
  fi
done

cce_section "GPU"
cce_report_gpu "these benchmarks need one"
[ "$CCE_GPU_VISIBLE" -eq 1 ] || cce_die "no GPU visible: run bench/run_gpu.sh on a GPU machine"

# 1. Build.
cce_find_nvcc
cmake_args=()
if [ -n "${CMAKE_PREFIX_PATH:-}" ]; then
  cmake_args+=("-DCMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH//:/;}")
fi
cce_configure_and_build ${cmake_args[@]+"${cmake_args[@]}"}

# 2. Inputs.
stage01="$BUILD_DIR/stages/stage01_materialized"
[ -x "$stage01" ] || cce_die "the build did not produce $stage01"
for shape in "${shape_list[@]}"; do
  if is_lm_shape "$shape"; then
    cce_section "inputs: $lm_data/$shape (trained-model data from bench/lm_data.py)"
    continue
  fi
  dir="$INPUTS/$shape"
  if [ -f "$dir/e.npy" ] && [ -f "$dir/c.npy" ] && [ -f "$dir/targets.npy" ]; then
    cce_section "inputs: $dir is there (delete it to write it again)"
    continue
  fi
  read -r n d v <<<"$(shape_dims "$shape")"
  mkdir -p "$dir"
  cmd=("$stage01" --n "$n" --d "$d" --v "$v" --dtype bf16 --data realistic --seed 1234 --save "$dir" --iters 0)
  cce_section "inputs: ${cmd[*]}"
  status=0
  "${cmd[@]}" || status=$?
  # 77: no usable GPU for the forward; the inputs are written before it.
  if [ "$status" -ne 0 ] && [ "$status" -ne 77 ]; then
    cce_die "writing the inputs of $shape failed (exit status $status)"
  fi
done

# 3. The C++ benchmark.
mkdir -p docs
bench="$BUILD_DIR/bench/cce_bench"
[ -x "$bench" ] || cce_die "the build did not produce $bench"
cmd=("$bench" "--shapes=$shapes" "--lm-data=$lm_data" --benchmark_out=docs/bench_cpp.json --benchmark_out_format=json
  ${bench_args[@]+"${bench_args[@]}"})
cce_section "C++ benchmark: ${cmd[*]}"
"${cmd[@]}"

# 4. The peers.
cmd=("$PYTHON" bench/peers.py --inputs "$INPUTS" --lm-data "$lm_data" --shapes "$shapes" --out docs/bench_peers.json
  --floor-json docs/bench_cpp.json)
cce_section "peers: ${cmd[*]}"
"${cmd[@]}"

# 5. The tables.
cmd=("$PYTHON" bench/results_table.py --update docs/results.md)
cce_section "tables: ${cmd[*]}"
"${cmd[@]}"

cce_section "done: docs/bench_cpp.json, docs/bench_peers.json, docs/results.md"
