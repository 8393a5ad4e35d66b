// Stage 08's forward epilogue: stage 03's fold (the deterministic split
// LSE: each unit leaves a (max, sum) per row, merged later in a fixed order),
// written again so that the same exponentials also give, for every row i and vocabulary tile T of the backward (128 columns in
// bf16, 64 in fp32), the tile's statistics
//   m_iT = max_{j∈T} z_ij,   s_iT = Σ_{j∈T} exp(z_ij − m_iT)  (1 ≤ s_iT ≤ |T|),
// packed into 32 bits: m_iT in bf16 rounded up (so that exp(m_iT − LSE_i)
// never underestimates a softmax entry: the drop decision stays safe) and
// s_iT, rescaled to that rounded max, in bf16. The backward knows from them, before computing anything,
// which tiles can be dropped (p_ij ≤ exp(m_iT − LSE_i) < eps) and how much
// softmax mass each dropped tile holds (s_iT·exp(m_iT − LSE_i)).
// Columns are positions in the sorted vocabulary (the forward walks a
// gathered copy of C, chunk by chunk; col_offset places the chunk).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/device_math.cuh"
#include "common/tile/units.cuh"
#include "stages/03_fused_gemm_ce/online_fold.cuh"

namespace cce::s08 {

// Columns per statistics tile for a fragment: 128 (bf16 products), 64 (fp32).
template <class Frag>
constexpr int stats_tile_cols() {
  return Frag::kBN < 128 ? Frag::kBN : 128;
}

// The sum is rescaled to the rounded-up max, so that s·exp(m − LSE) stays the
// tile's softmax mass (up to the sum's bf16 rounding).
__device__ __forceinline__ uint32_t pack_tile_stats(float max, float sum) {
  const __nv_bfloat16 rounded = __float2bfloat16_ru(max);
  const float rescaled = sum * __expf(max - __bfloat162float(rounded));
  const uint32_t m = __bfloat16_as_ushort(rounded);
  const uint32_t s = __bfloat16_as_ushort(__float2bfloat16_rn(rescaled));
  return (m << 16) | s;
}
__device__ __forceinline__ float stats_max(uint32_t packed) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(packed >> 16)));
}
__device__ __forceinline__ float stats_sum(uint32_t packed) {
  return __bfloat162float(__ushort_as_bfloat16(static_cast<unsigned short>(packed & 0xffffu)));
}
// Whether the sorted position lies in vocabulary tile `tile` (−1, no target: in none). A subtraction and an unsigned
// compare: position / tile_cols == tile divides 64-bit integers, dozens of instructions, for every (tile, row).
__device__ __forceinline__ bool in_tile(int64_t position, int64_t tile, int64_t tile_cols) {
  return static_cast<uint64_t>(position - tile * tile_cols) < static_cast<uint64_t>(tile_cols);
}

struct TileStatsParams {
  const int64_t* target_position;  // [N]: sorted position of t_i, −1 for ignored tokens
  int64_t n, v;                    // v: the whole vocabulary
  int64_t col_offset;              // sorted position of the chunk's first column
  float softcap;
  float2* partial;       // [ranges·N]: (max, sum) of row i over the chunk's range r
  float* target_logit;   // [N]: z_{i,t_i} as folded (softcapped)
  uint32_t* stats;       // [tiles][N]: packed (m_iT, s_iT), T = sorted tile
};

template <class Frag>
struct TileStatsEpilogue {
  using Params = TileStatsParams;
  using Team = typename Frag::Team;
  static constexpr int kStatsCols = stats_tile_cols<Frag>();
  static constexpr int kStatsPerTile = Frag::kBN / kStatsCols;
  static_assert(Frag::kBN % kStatsCols == 0, "a logits tile holds whole statistics tiles");
  // Threads that still hold partial statistics of a row after the quad's shuffles.
  static constexpr int kGroups = Frag::kColumnsShareLaneMod4 ? Frag::kRowSharers / 4 : Frag::kRowSharers;
  static constexpr size_t kSlotsOffset = (RowStates<Frag>::kSharedBytes + 15) / 16 * 16;
  static constexpr size_t kSharedBytes =
      kSlotsOffset + (kGroups > 1 ? static_cast<size_t>(Frag::kBM) * kStatsPerTile * kGroups * sizeof(float2) : 0);

  Params p;
  RowStates<Frag> states;
  float2* slots;  // [BM][kStatsPerTile][kGroups] when several groups share a row

  __device__ TileStatsEpilogue(const Params& params, unsigned char* shared)
      : p(params), states(shared), slots(reinterpret_cast<float2*>(shared + kSlotsOffset)) {}

  __device__ void begin(const Unit& unit) { states.init(p.target_position, unit.token_block * Frag::kBM, p.n); }

  // Stage 03's fold (online_fold.cuh), with the statistics taken from the
  // same exponentials: each thread sums exp(z − its running max) per
  // statistics tile, then rescales the sum to the tile's max once per row.
  __device__ void tile(Frag& frag, const Unit& unit, int64_t local_col0) {
    const int64_t row0 = unit.token_block * Frag::kBM, col0 = p.col_offset + local_col0;
    softcap_and_mask_tile(frag, col0, p.v, p.softcap);
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r) {
      const int tile_row = Frag::row_of(r);
      record_target_logit(frag, states, r, row0, col0, p.target_logit);
      float m[kStatsPerTile], sum[kStatsPerTile];
#pragma unroll
      for (int h = 0; h < kStatsPerTile; ++h) m[h] = -INFINITY, sum[h] = 0.0f;
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c)
#pragma unroll
        for (int h = 0; h < kStatsPerTile; ++h)  // a select, not an index: m and sum stay in registers
          if (kStatsPerTile == 1 || Frag::col_of(c) / kStatsCols == h) m[h] = fmaxf(m[h], frag.z(r, c));
      float tile_max = m[0];
#pragma unroll
      for (int h = 1; h < kStatsPerTile; ++h) tile_max = fmaxf(tile_max, m[h]);
      OnlineSoftmax& state = states.slot(tile_row);
      const float new_max = fmaxf(state.max, tile_max);
      if (new_max != -INFINITY) {
#pragma unroll
        for (int c = 0; c < Frag::kCols; ++c) {
          const float e = fast_exp2((frag.z(r, c) - new_max) * kLog2e);
#pragma unroll
          for (int h = 0; h < kStatsPerTile; ++h)
            if (kStatsPerTile == 1 || Frag::col_of(c) / kStatsCols == h) sum[h] += e;
        }
        float row_sum = state.sum * fast_exp2((state.max - new_max) * kLog2e);
#pragma unroll
        for (int h = 0; h < kStatsPerTile; ++h) row_sum += sum[h];
        state.sum = row_sum;
        state.max = new_max;
      }
#pragma unroll
      for (int h = 0; h < kStatsPerTile; ++h) {
        float tile_m = m[h];
        if constexpr (Frag::kColumnsShareLaneMod4) {  // the quad's max of the statistics tile
          tile_m = fmaxf(tile_m, __shfl_xor_sync(0xffffffffu, tile_m, 1));
          tile_m = fmaxf(tile_m, __shfl_xor_sync(0xffffffffu, tile_m, 2));
        }
        // Σ exp(z − tile_m) from Σ exp(z − new_max): one rescale (a sum that
        // underflowed belongs to a tile far below the row's max: it stays 0).
        float s = sum[h] > 0.0f ? sum[h] * fast_exp2(fminf((new_max - tile_m) * kLog2e, 126.0f)) : 0.0f;
        if constexpr (Frag::kColumnsShareLaneMod4) {
          s += __shfl_xor_sync(0xffffffffu, s, 1);
          s += __shfl_xor_sync(0xffffffffu, s, 2);
        }
        const int64_t tile = col0 / kStatsCols + h;
        if constexpr (kGroups == 1) {
          if (threadIdx.x % 4 == 0 && row0 + tile_row < p.n && tile * kStatsCols < p.v)
            p.stats[tile * p.n + row0 + tile_row] = pack_tile_stats(tile_m, s);
        } else {
          const int group = Frag::kColumnsShareLaneMod4 ? Frag::sharer_index() / 4 : Frag::sharer_index();
          if (!Frag::kColumnsShareLaneMod4 || threadIdx.x % 4 == 0)
            slots[(tile_row * kStatsPerTile + h) * kGroups + group] = make_float2(tile_m, s);
        }
      }
    }
    if constexpr (kGroups > 1) {  // merge the groups' pieces of each (row, statistics tile)
      Team::sync();
      for (int i = Team::rank(); i < Frag::kTeamRows * kStatsPerTile; i += Team::size()) {
        const int tile_row = Frag::team_row0() + i / kStatsPerTile, h = i % kStatsPerTile;
        OnlineSoftmax merged;
        for (int g = 0; g < kGroups; ++g) {
          const float2 piece = slots[(tile_row * kStatsPerTile + h) * kGroups + g];
          merged.merge(OnlineSoftmax{piece.x, piece.y});
        }
        const int64_t tile = col0 / kStatsCols + h;
        if (row0 + tile_row < p.n && tile * kStatsCols < p.v)
          p.stats[tile * p.n + row0 + tile_row] = pack_tile_stats(merged.max, merged.sum);
      }
      Team::sync();  // the slots are free for the next tile
    }
  }

  __device__ void end(const Unit& unit) {
    const OnlineSoftmax state = merge_row_states(states);
    const int tile_row = merged_row<Frag>();
    const int64_t row = unit.token_block * Frag::kBM + tile_row;
    if (tile_row >= 0 && row < p.n) p.partial[unit.range * p.n + row] = make_float2(state.max, state.sum);
  }
};

}  // namespace cce::s08
