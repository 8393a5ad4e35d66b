// Stage 03's device building blocks, included by the later stages:
//   fold_tile_into_rows: folds a logits tile held by a TileProduct into the
//       per-row online-softmax states of the thread, masking columns past V,
//       applying the softcap, and recording the target logit when its column
//       passes;
//   merge_row_states:    merges the states of the threads that share a tile
//       row (through shared memory), leaving one state per row.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_math.cuh"
#include "stages/02_online_softmax/online_softmax.cuh"
#include "stages/03_fused_gemm_ce/tile_product.cuh"

namespace cce {

// tile: the product for rows [row0, row0+BM) and vocabulary [col0, col0+BN).
// row_target[r]: target of the thread's row r (or a negative value for rows
// past N). target_logit: [N]; the one thread that sees (i, t_i) writes z there.
template <class Tile>
__device__ __forceinline__ void fold_tile_into_rows(Tile& tile, OnlineSoftmax (&state)[Tile::kRows],
                                                    const int (&row_target)[Tile::kRows], int64_t row0,
                                                    int64_t col0, int64_t v, float softcap,
                                                    float* __restrict__ target_logit) {
#pragma unroll
  for (int r = 0; r < Tile::kRows; ++r) {
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < Tile::kCols; ++c) {
      const int col = static_cast<int>(col0) + Tile::col_of(c);  // V < 2^31
      float z = col < v ? apply_softcap(tile.z(r, c), softcap) : -INFINITY;
      if (col == row_target[r]) target_logit[row0 + Tile::row_of(r)] = z;
      tile.z(r, c) = z;
      tile_max = fmaxf(tile_max, z);
    }
    if (tile_max == -INFINITY) continue;  // all columns past V
    // One rescale per row and tile, not one per value.
    const float new_max = fmaxf(state[r].max, tile_max);
    float sum = state[r].sum * __expf(state[r].max - new_max);
#pragma unroll
    for (int c = 0; c < Tile::kCols; ++c) sum += __expf(tile.z(r, c) - new_max);
    state[r].max = new_max;
    state[r].sum = sum;
  }
}

// After the last tile: one OnlineSoftmax per tile row, returned to the
// threads threadIdx.x < BM (row threadIdx.x). `scratch` holds
// BM · kRowSharers · 2 floats of shared memory (the tile's own buffer will do,
// once the product is done).
template <class Tile>
__device__ __forceinline__ OnlineSoftmax merge_row_states(const OnlineSoftmax (&state)[Tile::kRows], float* scratch) {
  float* maxes = scratch;
  float* sums = scratch + Tile::kBM * Tile::kRowSharers;
#pragma unroll
  for (int r = 0; r < Tile::kRows; ++r) {
    const int slot = Tile::row_of(r) * Tile::kRowSharers + Tile::sharer_index();
    maxes[slot] = state[r].max;
    sums[slot] = state[r].sum;
  }
  __syncthreads();
  OnlineSoftmax row_state;
  if (threadIdx.x < Tile::kBM) {
    for (int s = 0; s < Tile::kRowSharers; ++s) {
      OnlineSoftmax other;
      other.max = maxes[threadIdx.x * Tile::kRowSharers + s];
      other.sum = sums[threadIdx.x * Tile::kRowSharers + s];
      row_state.merge(other);
    }
  }
  __syncthreads();
  return row_state;
}

}  // namespace cce
