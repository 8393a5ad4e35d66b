// Sums over the rows of a logits tile, per column, without a pass through
// shared memory: what a stage needs when it accumulates a statistic of each
// vocabulary entry over the batch (stage 07's sorting key).
//
// In the tensor-core fragments (mma_sync.cuh's picture) the 8 lanes with the
// same lane % 4 hold the same columns of different rows. Each thread first
// adds its own rows, leaving kCols values; then three rounds of shuffles
// (partners lane ^ 16, ^ 8, ^ 4) each halve the values a lane keeps while
// adding its partner's copy of them (a reduce-scatter), so that each lane
// ends with kCols / 8 column sums over its warp's rows. The fp32 FFMA
// fragment has another layout: there each thread reports its own partial sums.
#pragma once

#include <cuda_runtime.h>

namespace cce {

// Calls emit(tile column, partial sum) for a share of the tile's columns;
// the partial sums of a column over all emitting threads add up to the sum
// over the tile's rows. Every thread of the warp must call it.
template <class Frag, class Emit>
__device__ __forceinline__ void sum_tile_columns(Frag& tile, Emit&& emit) {
  float v[Frag::kCols];
#pragma unroll
  for (int c = 0; c < Frag::kCols; ++c) {
    v[c] = 0.0f;
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r) v[c] += tile.z(r, c);
  }
  if constexpr (Frag::kColumnsShareLaneMod4) {
    static_assert(Frag::kCols % 8 == 0, "three halvings");
    const int lane = static_cast<int>(threadIdx.x % 32);
    int kept = Frag::kCols;
#pragma unroll
    for (int mask = 16; mask >= 4; mask /= 2) {
      kept /= 2;
      const bool upper = (lane & mask) != 0;  // this lane keeps the upper half
#pragma unroll
      for (int i = 0; i < Frag::kCols / 2; ++i) {
        if (i >= kept) break;
        const float keep = upper ? v[i + kept] : v[i];
        const float send = upper ? v[i] : v[i + kept];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
      }
    }
    // Value k now sums column index k + (kCols/8)·(lane/4 % 8) of the thread's fragment.
    constexpr int kLeft = Frag::kCols / 8;
#pragma unroll
    for (int k = 0; k < kLeft; ++k) emit(Frag::col_of(k + kLeft * ((lane / 4) % 8)), v[k]);
  } else {
#pragma unroll
    for (int c = 0; c < Frag::kCols; ++c) emit(Frag::col_of(c), v[c]);
  }
}

}  // namespace cce
