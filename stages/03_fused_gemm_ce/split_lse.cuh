// Stage 03's epilogue as a building block: fold each tile of a unit into
// per-row online-softmax states and leave the unit's (max, sum) per row in
// `partial`; merge_ranges (fused_gemm_ce.h) then makes LSE and loss of them.
// A later stage may wrap it in an epilogue of its own (stage 10 stores the
// tile first).
#pragma once

#include "common/tile/units.cuh"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"
#include "stages/03_fused_gemm_ce/online_fold.cuh"

namespace cce::s03 {

// The epilogue: begin a unit with empty row states, fold each tile, leave
// the unit's (max, sum) per row in `partial`.
template <class Frag>
struct SplitLseEpilogue {
  using Params = SplitLseParams;
  static constexpr size_t kSharedBytes = RowStates<Frag>::kSharedBytes;
  Params p;
  RowStates<Frag> states;

  __device__ SplitLseEpilogue(const Params& params, unsigned char* shared) : p(params), states(shared) {}
  __device__ void begin(const Unit& unit) {
    states.init(p.target_logit != nullptr ? p.targets : nullptr, unit.token_block * Frag::kBM, p.n);
  }
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    fold_tile_into_rows(frag, states, unit.token_block * Frag::kBM, col0, p.v, p.softcap, p.target_logit);
  }
  __device__ void end(const Unit& unit) {
    const OnlineSoftmax state = merge_row_states(states);
    const int tile_row = merged_row<Frag>();
    const int64_t row = unit.token_block * Frag::kBM + tile_row;
    if (tile_row >= 0 && row < p.n) p.partial[unit.range * p.n + row] = make_float2(state.max, state.sum);
  }
};

}  // namespace cce::s03
