// The block-level tile product for fp32 inputs: a classic shared-memory
// tiled FFMA product, 64×64 tiles, a 4×4 micro-tile per thread. The same
// contract as TileProductMmaSync (tile_mma_sync.cuh): z(r, c), row_of,
// col_of, sharers, Team, for_each_tile with an optional gather of B's rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/team.cuh"

namespace cce {

struct TileProductFp32 {
  static constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256, kMinBlocksPerSm = 2;
  static constexpr int kRows = 4, kCols = 4;
  static_assert(kBM == kBN, "one loop loads both operand tiles");
  static constexpr size_t kSharedBytes = static_cast<size_t>(kBK) * (kBM + kBN + 2) * sizeof(float);
  static_assert(kSharedBytes % 16 == 0, "callers place more shared memory after the tile's");
  using Team = BlockTeam;
  static constexpr int kTeamThreads = kThreads;
  // Whether the 8 lanes with the same lane % 4 hold the same columns (column_sums.cuh).
  static constexpr bool kColumnsShareLaneMod4 = false;
  static constexpr int kTeamRows = kBM;
  __device__ __forceinline__ static int team_row0() { return 0; }

  float acc[kRows][kCols];

  // Thread (tx, ty) of a 16×16 grid owns rows ty + 16r and columns tx + 16c:
  // a warp's loads from shared memory then hit consecutive addresses.
  __device__ __forceinline__ static int row_of(int r) { return threadIdx.x / 16 + 16 * r; }
  __device__ __forceinline__ static int col_of(int c) { return threadIdx.x % 16 + 16 * c; }
  __device__ __forceinline__ float& z(int r, int c) { return acc[r][c]; }
  static constexpr int kRowSharers = 16;
  __device__ __forceinline__ static int sharer_index() { return threadIdx.x % 16; }

  // Same contract as TileProductMmaSync::for_each_tile (kAligned is unused:
  // the fp32 loads are element-wise).
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const float* __restrict__ a, int64_t rows_a, int64_t row0,
                                const float* __restrict__ b, int64_t rows_b, const int* __restrict__ b_rows,
                                int64_t tile_begin, int64_t tile_end, int64_t d, unsigned char* smem_bytes,
                                OnTile&& on_tile) {
    for_each_tile<kAligned>(a, rows_a, row0, nullptr, b, rows_b, b_rows, tile_begin, tile_end, d, smem_bytes, on_tile);
  }
  // A's rows gathered too: with a_rows, tile row r reads row a_rows[row0 + r] of A.
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const float* __restrict__ a, int64_t rows_a, int64_t row0,
                                const int* __restrict__ a_rows, const float* __restrict__ b, int64_t rows_b,
                                const int* __restrict__ b_rows, int64_t tile_begin, int64_t tile_end, int64_t d,
                                unsigned char* smem_bytes, OnTile&& on_tile) {
    float* smem = reinterpret_cast<float*>(smem_bytes);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      compute_tile(a, rows_a, row0, a_rows, b, rows_b, b_rows, t * kBN, d, smem);
      on_tile(t * kBN);
    }
  }

 private:
  __device__ void compute_tile(const float* __restrict__ a, int64_t rows_a, int64_t row0, const int* __restrict__ a_rows,
                               const float* __restrict__ b, int64_t rows_b, const int* __restrict__ b_rows,
                               int64_t col0, int64_t d, float* smem) {
    // Shared tiles stored k-major, [BK][BM+1] and [BK][BN+1] (padded).
    float* sa = smem;
    float* sb = smem + kBK * (kBM + 1);
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c) acc[r][c] = 0.0f;
    for (int64_t k0 = 0; k0 < d; k0 += kBK) {
      for (int i = threadIdx.x; i < kBK * kBM; i += kThreads) {
        const int row = i / kBK, k = i % kBK;  // consecutive threads read consecutive k of a row
        int64_t gr = row0 + row;
        const int64_t gk = k0 + k;
        if (gr < rows_a && a_rows != nullptr) gr = a_rows[gr];
        sa[k * (kBM + 1) + row] = (gr < rows_a && gk < d) ? a[gr * d + gk] : 0.0f;
        int64_t gc = col0 + row;
        if (gc < rows_b && b_rows != nullptr) gc = b_rows[gc];
        sb[k * (kBN + 1) + row] = (gc < rows_b && gk < d) ? b[gc * d + gk] : 0.0f;
      }
      __syncthreads();
#pragma unroll
      for (int k = 0; k < kBK; ++k) {
        float av[kRows], bv[kCols];
#pragma unroll
        for (int r = 0; r < kRows; ++r) av[r] = sa[k * (kBM + 1) + row_of(r)];
#pragma unroll
        for (int c = 0; c < kCols; ++c) bv[c] = sb[k * (kBN + 1) + col_of(c)];
#pragma unroll
        for (int r = 0; r < kRows; ++r)
#pragma unroll
          for (int c = 0; c < kCols; ++c) acc[r][c] = fmaf(av[r], bv[c], acc[r][c]);
      }
      __syncthreads();
    }
  }
};

}  // namespace cce
