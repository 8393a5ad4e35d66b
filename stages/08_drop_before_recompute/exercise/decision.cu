// Exercise 08_drop_before_recompute (README.md beside this file): generated from ../decision.cu by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
// Stage 08's decision: which (token block × sorted vocabulary tile) pairs to
// keep, known from the forward's tile statistics before any logit is
// recomputed; and the exact terms of the targets that fall in dropped tiles.
#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/08_drop_before_recompute/tile_stats.cuh"

namespace cce::s08 {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

__device__ __forceinline__ int64_t row_at(const int* token_order, int64_t place) {
  return token_order != nullptr ? token_order[place] : place;
}

// Keep (T, b) iff a row i of block b with a gradient has exp(m_iT − LSE_i) ≥ eps:
// every softmax entry of a dropped tile is below eps (m_iT is rounded up).
// A block per (tile, token block), a thread per row; kept_per_tile[T]
// (zeroed before) counts T's kept blocks.
__global__ void decide_kernel(const uint32_t* __restrict__ stats, const float* __restrict__ lse,
                              const float* __restrict__ grad_scale, const int* __restrict__ token_order, int64_t n,
                              int64_t token_blocks, float log_eps, bool keep_all, uint8_t* __restrict__ keep,
                              int* __restrict__ kept_per_tile) {
  const int64_t tile = blockIdx.x;
  for (int64_t b = blockIdx.y; b < token_blocks; b += gridDim.y) {  // at most 65535 blocks in y
    const int64_t place = b * blockDim.x + threadIdx.x;
    const int64_t row = place < n ? row_at(token_order, place) : n;
    bool needed = false;
    // EXERCISE(the drop decision): does the row need the tile (its largest softmax entry ≥ eps)?
    CCE_EXERCISE_MISSING("08_drop_before_recompute", "the drop decision");
    // END EXERCISE
    const bool any = __syncthreads_or(needed);
    if (threadIdx.x == 0) {
      keep[tile * token_blocks + b] = any ? 1 : 0;
      if (any) atomicAdd(kept_per_tile + tile, 1);
    }
  }
}

__global__ void target_coefficient_kernel(const float* __restrict__ grad_scale, const float* __restrict__ lse,
                                          const float* __restrict__ target_logit, const int64_t* __restrict__ position,
                                          const uint8_t* __restrict__ keep, const int* __restrict__ token_place,
                                          int64_t n, int64_t token_blocks, int64_t tile_rows, int64_t tile_cols,
                                          float softcap, float* __restrict__ coefficient) {
  wait_for_kernel_ahead();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  bool dropped = position[i] >= 0 && grad_scale[i] != 0.0f;
  if (dropped) {
    const int64_t place = token_place != nullptr ? token_place[i] : i;
    dropped = keep[(position[i] / tile_cols) * token_blocks + place / tile_rows] == 0;
  }
  const float z = target_logit[i];
  coefficient[i] = dropped ? grad_scale[i] * (__expf(z - lse[i]) - 1.0f) * softcap_derivative(z, softcap) : 0.0f;
}

}  // namespace

TileGrid tile_grid(const Problem& p) {
  TileGrid grid;
  grid.tile_rows = grid.tile_cols = backward_tile(p.dtype);
  grid.tiles = (p.v + grid.tile_cols - 1) / grid.tile_cols;
  grid.token_blocks = (p.n + grid.tile_rows - 1) / grid.tile_rows;
  return grid;
}

float default_drop_eps(Dtype dtype) { return dtype == Dtype::kBFloat16 ? std::ldexp(1.0f, -8) : std::ldexp(1.0f, -28); }

std::string describe_eps(float eps) {
  if (eps <= 0.0f) return "off (every tile kept)";
  const int exponent = static_cast<int>(std::lround(std::log2(eps)));
  return std::ldexp(1.0f, exponent) == eps ? "eps 2^" + std::to_string(exponent) : "eps " + std::to_string(eps);
}

void decide_kept_pairs(const Problem& p, const TileGrid& grid, const DecisionInputs& inputs, float eps, uint8_t* keep,
                       int* kept_per_tile, cudaStream_t stream) {
  CCE_CUDA_CHECK(cudaMemsetAsync(kept_per_tile, 0, static_cast<size_t>(grid.tiles) * sizeof(int), stream));
  if (grid.pairs() == 0) return;
  const dim3 blocks(static_cast<unsigned>(grid.tiles), static_cast<unsigned>(std::min<int64_t>(grid.token_blocks, 65535)));
  decide_kernel<<<blocks, static_cast<unsigned>(grid.tile_rows), 0, stream>>>(
      inputs.forward->stats, inputs.lse, inputs.grad_scale, inputs.blocks.token_order, p.n, grid.token_blocks,
      eps > 0.0f ? std::log(eps) : -INFINITY, eps <= 0.0f, keep, kept_per_tile);
  CCE_CHECK_LAUNCH();
}

void target_coefficients(const Problem& p, const TileGrid& grid, const DecisionInputs& inputs, const uint8_t* keep,
                         float* coefficient, cudaStream_t stream) {
  if (p.n == 0) return;
  launch_dependent(target_coefficient_kernel, blocks_for(p.n), kThreads, stream,
      inputs.grad_scale, inputs.lse, inputs.forward->target_logit, inputs.forward->target_position, keep,
      inputs.blocks.token_place, p.n, grid.token_blocks, grid.tile_rows, grid.tile_cols, p.softcap, coefficient);
}

}  // namespace cce::s08
