// Stage 03's idea on the device: fold each logits tile into per-row
// online-softmax states (stage 02's (max, sum)) the moment it is computed,
// then forget the tile.
//
// The kRowSharers threads that hold pieces of a tile row each fold their
// pieces into their own slot of a shared-memory block (RowStates), so no
// thread waits for another until the end of a unit, when the slots of each
// row are merged. (In registers the slots would cost the block-level
// products 16 registers per thread that their accumulators cannot spare.)
// Written once against the fragment interface of the tile engine
// (common/tile/tile_mma_sync.cuh), these run under every tile product.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_math.cuh"
#include "stages/02_online_softmax/online_softmax.cuh"

namespace cce {

template <class Frag>
struct RowStates {
  static constexpr size_t kSharedBytes =
      static_cast<size_t>(Frag::kBM) * Frag::kRowSharers * sizeof(OnlineSoftmax) + Frag::kBM * sizeof(int);
  using Team = typename Frag::Team;
  OnlineSoftmax* slots;  // [BM][kRowSharers]
  int* targets;          // [BM]: t_i, or −1 for rows past N (never matches a column)

  __device__ explicit RowStates(unsigned char* shared) {
    slots = reinterpret_cast<OnlineSoftmax*>(shared);
    targets = reinterpret_cast<int*>(shared + static_cast<size_t>(Frag::kBM) * Frag::kRowSharers *
                                                  sizeof(OnlineSoftmax));
  }
  // Empty states for the team's rows and their targets (none recorded when
  // all_targets is null: the LSE-only mode). Starts and ends with the team's
  // barrier: the previous unit's merge is done reading the slots.
  __device__ void init(const int64_t* __restrict__ all_targets, int64_t row0, int64_t n) {
    constexpr int kSlots = Frag::kTeamRows * Frag::kRowSharers;
    const int first = Frag::team_row0();
    Team::sync();
    for (int i = Team::rank(); i < kSlots; i += Team::size()) slots[first * Frag::kRowSharers + i] = OnlineSoftmax{};
    for (int i = Team::rank(); i < Frag::kTeamRows; i += Team::size()) {
      const int64_t row = row0 + first + i;
      targets[first + i] = all_targets != nullptr && row < n ? static_cast<int>(all_targets[row]) : -1;  // V < 2^31
    }
    Team::sync();
  }
  __device__ OnlineSoftmax& slot(int tile_row) { return slots[tile_row * Frag::kRowSharers + Frag::sharer_index()]; }
};

// A tile's logits as the fold uses them: softcapped, and −inf past V. Two
// loops: one loop with both tests spills registers in the pipeline kernels.
template <class Frag>
__device__ __forceinline__ void softcap_and_mask_tile(Frag& tile, int64_t col0, int64_t v, float softcap) {
  if (softcap > 0.0f) {
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r)
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c) tile.z(r, c) = apply_softcap(tile.z(r, c), softcap);
  }
  if (col0 + Frag::kBN > v) {  // V's last tile
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r)
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c)
        if (col0 + Frag::col_of(c) >= v) tile.z(r, c) = -INFINITY;
  }
}

// Row r's target logit into target_logit [N], if the tile holds the
// target's column.
template <class Frag>
__device__ __forceinline__ void record_target_logit(Frag& tile, const RowStates<Frag>& states, int r, int64_t row0,
                                                    int64_t col0, float* __restrict__ target_logit) {
  const int tile_row = Frag::row_of(r);
  const int target = states.targets[tile_row];
  if (target >= col0 && target < col0 + Frag::kBN) {  // rare: one tile per row holds the target
#pragma unroll
    for (int c = 0; c < Frag::kCols; ++c)
      if (col0 + Frag::col_of(c) == target) target_logit[row0 + tile_row] = tile.z(r, c);
  }
}

// Folds one logits tile, rows [row0, row0+BM) × vocabulary [col0, col0+BN),
// into the row states: masks columns past V (−inf), applies the softcap, and
// records the target logit in target_logit [N] (when not null) as its column
// passes. The tile's values are rewritten in place as the logits used.
template <class Frag>
__device__ __forceinline__ void fold_tile_into_rows(Frag& tile, RowStates<Frag>& states, int64_t row0, int64_t col0,
                                                    int64_t v, float softcap, float* __restrict__ target_logit) {
  softcap_and_mask_tile(tile, col0, v, softcap);
#pragma unroll
  for (int r = 0; r < Frag::kRows; ++r) {
    const int tile_row = Frag::row_of(r);
    if (target_logit != nullptr) record_target_logit(tile, states, r, row0, col0, target_logit);
    // EXERCISE(the fold): the row's tile max, one rescale of its slot, then the exps added
    // The tile's row maximum, in four independent chains.
    float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
    for (int c = 0; c < Frag::kCols; ++c) m[c % 4] = fmaxf(m[c % 4], tile.z(r, c));
    const float tile_max = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
    if (tile_max == -INFINITY) continue;  // all columns past V
    // One rescale per row and tile, not one per value. exp(z − max) is
    // 2^((z − max)·log2e): the difference first, exact for nearby values,
    // so that logits of ±1e4 lose nothing.
    OnlineSoftmax& state = states.slot(tile_row);
    const float new_max = fmaxf(state.max, tile_max);
    float s[4] = {state.sum * fast_exp2((state.max - new_max) * kLog2e), 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < Frag::kCols; ++c) s[c % 4] += fast_exp2((tile.z(r, c) - new_max) * kLog2e);
    state.max = new_max;
    state.sum = (s[0] + s[1]) + (s[2] + s[3]);
    // END EXERCISE
  }
}

// After a unit's last tile: the merged state of one row per team thread
// (rank < kTeamRows: row team_row0() + rank of the tile). Starts with the
// team's barrier.
template <class Frag>
__device__ __forceinline__ OnlineSoftmax merge_row_states(RowStates<Frag>& states) {
  using Team = typename Frag::Team;
  Team::sync();
  OnlineSoftmax row_state;
  if (Team::rank() < Frag::kTeamRows) {
    const int tile_row = Frag::team_row0() + Team::rank();
    for (int s = 0; s < Frag::kRowSharers; ++s) row_state.merge(states.slots[tile_row * Frag::kRowSharers + s]);
  }
  return row_state;
}

// The tile row whose merged state merge_row_states returned to this thread,
// or −1 when the thread got none.
template <class Frag>
__device__ __forceinline__ int merged_row() {
  using Team = typename Frag::Team;
  return Team::rank() < Frag::kTeamRows ? Frag::team_row0() + Team::rank() : -1;
}

}  // namespace cce
