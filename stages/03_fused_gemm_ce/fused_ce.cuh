// Stage 03's device building blocks, included by the later stages.
//
// The per-row online-softmax states of a thread block live in shared memory,
// one slot per (tile row, sharer): the kRowSharers threads that hold pieces
// of a tile row each fold their pieces into their own slot, so no thread
// waits for another until the very end. (In registers they would cost 16 more
// per thread, which the tile product's accumulators cannot spare.)
//   RowStates:           that shared-memory block, with the rows' targets;
//   fold_tile_into_rows: folds one logits tile into the slots, masking
//                        columns past V, applying the softcap and recording
//                        the target logit when its column passes;
//   merge_row_states:    merges the slots of each row into one state.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_math.cuh"
#include "stages/02_online_softmax/online_softmax.cuh"
#include "stages/03_fused_gemm_ce/tile_product.cuh"

namespace cce {

template <class Tile>
struct RowStates {
  static constexpr size_t kSharedBytes =
      static_cast<size_t>(Tile::kBM) * Tile::kRowSharers * sizeof(OnlineSoftmax) + Tile::kBM * sizeof(int);
  OnlineSoftmax* slots;  // [BM][kRowSharers]
  int* targets;          // [BM]: t_i, or −1 for rows past N (never matches a column)

  __device__ explicit RowStates(unsigned char* shared) {
    slots = reinterpret_cast<OnlineSoftmax*>(shared);
    targets = reinterpret_cast<int*>(shared + static_cast<size_t>(Tile::kBM) * Tile::kRowSharers *
                                                  sizeof(OnlineSoftmax));
  }
  // Empty states and the rows' targets (none recorded when all_targets is
  // null: the LSE-only variant); ends with a barrier.
  __device__ void init(const int64_t* __restrict__ all_targets, int64_t row0, int64_t n) {
    for (int i = threadIdx.x; i < Tile::kBM * Tile::kRowSharers; i += blockDim.x) slots[i] = OnlineSoftmax{};
    for (int i = threadIdx.x; i < Tile::kBM; i += blockDim.x)
      targets[i] = all_targets != nullptr && row0 + i < n ? static_cast<int>(all_targets[row0 + i]) : -1;  // V < 2^31
    __syncthreads();
  }
  __device__ OnlineSoftmax& slot(int tile_row) { return slots[tile_row * Tile::kRowSharers + Tile::sharer_index()]; }
};

// tile holds the logits of rows [row0, row0+BM) and vocabulary [col0, col0+BN).
// target_logit: [N]; the one thread that sees (i, t_i) writes z there.
template <class Tile>
__device__ __forceinline__ void fold_tile_into_rows(Tile& tile, RowStates<Tile>& states, int64_t row0, int64_t col0,
                                                    int64_t v, float softcap, float* __restrict__ target_logit) {
#pragma unroll
  for (int r = 0; r < Tile::kRows; ++r) {
    const int tile_row = Tile::row_of(r);
    const int target = states.targets[tile_row];
    float tile_max = -INFINITY;
#pragma unroll
    for (int c = 0; c < Tile::kCols; ++c) {
      const int col = static_cast<int>(col0) + Tile::col_of(c);  // V < 2^31
      const float z = col < v ? apply_softcap(tile.z(r, c), softcap) : -INFINITY;
      if (col == target) target_logit[row0 + tile_row] = z;
      tile.z(r, c) = z;
      tile_max = fmaxf(tile_max, z);
    }
    if (tile_max == -INFINITY) continue;  // all columns past V
    // One rescale per row and tile, not one per value.
    OnlineSoftmax& state = states.slot(tile_row);
    const float new_max = fmaxf(state.max, tile_max);
    float sum = state.sum * __expf(state.max - new_max);
#pragma unroll
    for (int c = 0; c < Tile::kCols; ++c) sum += __expf(tile.z(r, c) - new_max);
    state.max = new_max;
    state.sum = sum;
  }
}

// After the last tile: the merged state of tile row threadIdx.x, for the
// threads threadIdx.x < BM. Starts with a barrier.
template <class Tile>
__device__ __forceinline__ OnlineSoftmax merge_row_states(RowStates<Tile>& states) {
  __syncthreads();
  OnlineSoftmax row_state;
  if (threadIdx.x < Tile::kBM)
    for (int s = 0; s < Tile::kRowSharers; ++s) row_state.merge(states.slots[threadIdx.x * Tile::kRowSharers + s]);
  return row_state;
}

}  // namespace cce
