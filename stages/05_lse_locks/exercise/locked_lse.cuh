// Exercise 05_lse_locks (README.md beside this file): generated from ../locked_lse.cuh by
// scripts/exercise.py; write the EXERCISE blocks.
#include "common/exercise.h"
// Stage 05's epilogue: fold every tile of a unit into row states (stage 03's
// fold, LSE only), then merge the unit's partial LSE of each row into the
// global LSE under the spin lock of its team's rows (a token block, or a
// consumer warpgroup's 64 rows on the pipeline). A later stage can wrap this
// epilogue in its own to do more with the same tiles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/units.cuh"
#include "stages/03_fused_gemm_ce/online_fold.cuh"

namespace cce::s05 {

struct LockedLseParams {
  int64_t n, v;
  float softcap;
  float* lse;  // [N], −inf before the launch
  int* locks;  // [⌈N / team rows⌉]: a lock per team's rows, 0 before the launch
};

__device__ __forceinline__ float log_add_exp(float a, float b) {
  const float m = fmaxf(a, b);
  if (m == -INFINITY) return -INFINITY;
  return m + log1pf(__expf(fminf(a, b) - m));
}

template <class Frag>
struct LockedLseEpilogue {
  using Params = LockedLseParams;
  using Team = typename Frag::Team;
  static constexpr size_t kSharedBytes = RowStates<Frag>::kSharedBytes;
  Params p;
  RowStates<Frag> states;

  __device__ LockedLseEpilogue(const Params& params, unsigned char* shared) : p(params), states(shared) {}
  __device__ void begin(const Unit& unit) { states.init(nullptr, unit.token_block * Frag::kBM, p.n); }
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    fold_tile_into_rows(frag, states, unit.token_block * Frag::kBM, col0, p.v, p.softcap, nullptr);
  }
  // The lock guards the rows this team merges (a token block, or its half
  // on the pipeline, where each warpgroup merges its own 64 rows). One
  // thread takes it (atomicCAS, then an acquire fence), the team's barrier
  // orders everyone's reads after that; after the updates, the barrier and
  // one release fence order everyone's writes before the unlock. The LSE is
  // read and written with .cg accesses (L2, not the SM's own L1, which
  // another SM's writes do not update).
  __device__ void end(const Unit& unit) {
    const OnlineSoftmax state = merge_row_states(states);
    // EXERCISE(the lock protocol): lock and fence, merge the rows into p.lse, fence and unlock
    CCE_EXERCISE_MISSING("05_lse_locks", "the lock protocol");
    // END EXERCISE
  }
};

}  // namespace cce::s05
