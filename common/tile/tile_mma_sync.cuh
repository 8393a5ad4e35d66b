// The block-level tile product on mma.sync (any GPU from sm_80; the path an
// A100 runs): one thread block computes a logits tile
//   Z[BM rows of A, BN rows of B] = A_tile · B_tileᵀ      (A = E, B = C)
// over the whole of D, on chip, in fp32.
//
// Tiles of A and B, BK = 32 columns of D at a time, are staged in shared
// memory by cp.async, kStages deep, so the loads of later slices overlap the
// products of the current one. Each of the 8 warps owns a 64×32 piece of the
// 128×128 tile: 4×4 mma tiles of 16×8 (mma_sync.cuh), i.e. 64 fp32
// accumulators per thread. ldmatrix moves 8×8 sub-tiles from shared memory
// into the fragment layout mma expects; shared-memory rows are padded from
// 64 to 80 bytes so that its eight row addresses fall in distinct banks.
//
// Every tile product exposes its tile the same way: each thread holds
// kRows × kCols values z(r, c) at tile row row_of(r) and column col_of(c);
// kRowSharers threads hold pieces of each row (sharer_index() tells which);
// Team is the group of threads that meets at barriers. Stages fold these
// values (online softmax, gradients) without knowing which product made them.
//
// Rows of A past rows_a, rows of B past rows_b and columns past D are loaded
// as zeros; the caller masks columns past V. When D is not a multiple of 8
// (16-byte rows are then misaligned) the loads fall back to element loads.
// B's rows can be gathered: with b_rows, tile position p reads row b_rows[p];
// A's too, in the overload that takes a_rows: tile row r reads row a_rows[row0 + r].
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/mma_sync.cuh"
#include "common/tile/team.cuh"

namespace cce {

// 8 warps as 2 × 4 pieces of 64×32: 16 threads share a tile row.
struct TileProductMmaSync : MmaSyncWarpGrid<64, 32, 2, 4> {
  static constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4, kThreads = 256, kMinBlocksPerSm = 2;
  static constexpr int kPitch = kBK + 8;  // bf16 elements per shared-memory row (+16 bytes against bank conflicts)
  static constexpr size_t kStageElems = static_cast<size_t>(kBM + kBN) * kPitch;
  static constexpr size_t kSharedBytes = kStageElems * kStages * sizeof(__nv_bfloat16);
  using Team = BlockTeam;
  static constexpr int kTeamThreads = kThreads;
  // Whether the 8 lanes with the same lane % 4 hold the same columns (column_sums.cuh).
  static constexpr bool kColumnsShareLaneMod4 = true;
  static constexpr int kTeamRows = kBM;  // the team holds every row of the tile
  __device__ __forceinline__ static int team_row0() { return 0; }

  // For each vocabulary tile t in [tile_begin, tile_end): computes the tile
  // of rows [row0, row0+BM) of A [rows_a, d] and positions [t·BN, t·BN+BN) of
  // B [rows_b, d] into the accumulators, then calls on_tile(t·BN). on_tile may
  // overwrite the accumulators; shared memory is free again only after
  // for_each_tile returns. Each tile fills the cp.async pipeline anew
  // (running it across tiles measured 7% slower on an H200: the loop body
  // grows and the compiler schedules the products worse).
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const __nv_bfloat16* __restrict__ b, int64_t rows_b, const int* __restrict__ b_rows,
                                int64_t tile_begin, int64_t tile_end, int64_t d, unsigned char* smem_bytes,
                                OnTile&& on_tile) {
    for_each_tile<kAligned>(a, rows_a, row0, nullptr, b, rows_b, b_rows, tile_begin, tile_end, d, smem_bytes, on_tile);
  }
  // A's rows gathered too: with a_rows, tile row r reads row a_rows[row0 + r] of A.
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const int* __restrict__ a_rows, const __nv_bfloat16* __restrict__ b, int64_t rows_b,
                                const int* __restrict__ b_rows, int64_t tile_begin, int64_t tile_end, int64_t d,
                                unsigned char* smem_bytes, OnTile&& on_tile) {
    __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_bytes);
    const int k_tiles = static_cast<int>((d + kBK - 1) / kBK);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      zero();
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage<kAligned>(a, rows_a, row0, a_rows, b, rows_b, b_rows, t * kBN, d, s, smem + s * kStageElems);
        commit();
      }
      for (int kt = 0; kt < k_tiles; ++kt) {
        wait_for_stage();
        __syncthreads();
        const int next = kt + kStages - 1;
        if (next < k_tiles)
          load_stage<kAligned>(a, rows_a, row0, a_rows, b, rows_b, b_rows, t * kBN, d, next,
                               smem + (next % kStages) * kStageElems);
        commit();
        multiply_stage(smem + (kt % kStages) * kStageElems);
      }
      wait_all();
      __syncthreads();
      on_tile(t * kBN);
    }
  }

 private:
  __device__ __forceinline__ static void commit() { asm volatile("cp.async.commit_group;\n" ::); }
  __device__ __forceinline__ static void wait_for_stage() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
  }
  __device__ __forceinline__ static void wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

  // One BK-wide slice of both operands: (BM + BN) rows × 4 chunks of 16 bytes.
  template <bool kAligned>
  __device__ __forceinline__ static void load_stage(const __nv_bfloat16* a, int64_t rows_a, int64_t row0,
                                                    const int* a_rows, const __nv_bfloat16* b, int64_t rows_b,
                                                    const int* b_rows,
                                                    int64_t col0, int64_t d, int kt, __nv_bfloat16* stage) {
    constexpr int kChunksPerRow = kBK / 8;
    constexpr int kChunks = (kBM + kBN) * kChunksPerRow;
    const int64_t k0 = static_cast<int64_t>(kt) * kBK;
    static_assert(kChunks % kThreads == 0, "every thread copies the same number of chunks");
#pragma unroll
    for (int i = 0; i < kChunks / kThreads; ++i) {
      const int chunk = threadIdx.x + i * kThreads;
      const int tile_row = chunk / kChunksPerRow, part = chunk % kChunksPerRow;
      const bool is_a = tile_row < kBM;
      int64_t row = is_a ? row0 + tile_row : col0 + (tile_row - kBM);
      const int64_t rows = is_a ? rows_a : rows_b;
      const int* gather = is_a ? a_rows : b_rows;
      if (gather != nullptr && row < rows) row = gather[row];
      const __nv_bfloat16* base = is_a ? a : b;
      const int64_t k = k0 + part * 8;
      __nv_bfloat16* dst = stage + tile_row * kPitch + part * 8;
      if constexpr (kAligned) {
        const bool valid = row < rows && k < d;  // d % 8 == 0: a chunk is all in or all out
        cp_async_16(static_cast<uint32_t>(__cvta_generic_to_shared(dst)), valid ? base + row * d + k : base, valid);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          dst[e] = (row < rows && k + e < d) ? base[row * d + k + e] : __float2bfloat16(0.0f);
      }
    }
  }

  __device__ __forceinline__ void multiply_stage(const __nv_bfloat16* stage) {
    const __nv_bfloat16* sa = stage;
    const __nv_bfloat16* sb = stage + kBM * kPitch;
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t af[kMTiles][4], bf[kNTiles][2];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        // Lanes 0-15 address rows 0-15 at k, lanes 16-31 the same rows at k+8.
        const __nv_bfloat16* p = sa + (warp_m() * kWarpRows + mt * 16 + lane % 16) * kPitch + ks + (lane / 16) * 8;
        ldmatrix_x4(af[mt], p);
      }
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        // Two n8 tiles at once: lanes 0-7 / 8-15 rows n0..n0+7 at k / k+8,
        // lanes 16-31 the same for n0+8..n0+15.
        const int n = warp_n() * kWarpCols + np * 16 + (lane % 8) + (lane / 16) * 8;
        const __nv_bfloat16* p = sb + n * kPitch + ks + ((lane / 8) % 2) * 8;
        uint32_t r[4];
        ldmatrix_x4(r, p);
        bf[2 * np][0] = r[0];
        bf[2 * np][1] = r[1];
        bf[2 * np + 1][0] = r[2];
        bf[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) mma_bf16(acc[mt][nt], af[mt], bf[nt]);
    }
  }
};

}  // namespace cce
