// The forward's tile product on mma.sync: what an A100 (or any GPU without
// the Hopper paths) runs for every forward epilogue. Same tile (128×128),
// same fragment contract and same instructions as TileProductMmaSync
// (tile_mma_sync.cuh, which the backward kernels keep: their products need
// its 8 warps), arranged for speed:
//
//   - 4 warps, each a 64×64 piece of the tile (4×8 mma tiles, 128 fp32
//     accumulators per thread). Per 16 columns of D a warp loads 8 ldmatrix.x4
//     for 32 mma.sync, where a 64×32 piece loads 6 for 16: a third less
//     shared-memory traffic per product.
//   - Shared-memory rows of 64 bytes (BK = 32 bf16), unpadded: 16-byte chunk c
//     of row r is stored at chunk c ⊕ ((r / 2) mod 4), so the 8 rows one
//     ldmatrix phase reads (8 consecutive rows, one chunk) fall in 8 distinct
//     16-byte bank groups. 16 KB per stage, 4 stages: 64 KB.
//   - Fragments double-buffered in registers: the ldmatrix of the next 16
//     columns is issued before the 32 products of the current ones, and the
//     next slice's first fragments are loaded right after the block barrier,
//     so the tensor cores never wait for shared memory.
//   - 128 threads and 64 KB (plus the epilogue's) leave room for two blocks
//     on an SM, on an A100 (164 KB of shared memory, 64 K registers) as on an
//     H100: while one block folds its finished tile (the epilogue, no
//     products), the other one multiplies.
//
// Rows of A past rows_a, rows of B past rows_b and columns past D are loaded
// as zeros (cp.async's zero fill); the caller masks columns past V. Needs
// D % 8 == 0 (16-byte rows): unaligned problems take TileProductMmaSync's
// element loads. B's rows can be gathered: with b_rows, tile position p
// reads row b_rows[p].
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/mma_sync.cuh"
#include "common/tile/team.cuh"

namespace cce {

// 4 warps as 2 × 2 pieces of 64×64: 8 threads share a tile row.
struct TileProductMmaSyncForward : MmaSyncWarpGrid<64, 64, 2, 2> {
  static constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4, kThreads = 128, kMinBlocksPerSm = 2;
  static constexpr int kRowBytes = kBK * 2;  // one slice row: 4 chunks of 16 bytes
  static constexpr uint32_t kOperandBytes = kBM * kRowBytes;  // A's rows, then B's (kBM == kBN)
  static constexpr uint32_t kStageBytes = 2 * kOperandBytes;
  static constexpr size_t kSharedBytes = static_cast<size_t>(kStageBytes) * kStages;
  using Team = BlockTeam;
  static constexpr int kTeamThreads = kThreads;
  static constexpr bool kColumnsShareLaneMod4 = true;
  static constexpr int kTeamRows = kBM;
  __device__ __forceinline__ static int team_row0() { return 0; }

  // The same contract as TileProductMmaSync::for_each_tile.
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const __nv_bfloat16* __restrict__ b, int64_t rows_b, const int* __restrict__ b_rows,
                                int64_t tile_begin, int64_t tile_end, int64_t d, unsigned char* smem_bytes,
                                OnTile&& on_tile) {
    static_assert(kAligned, "unaligned rows (D % 8 != 0) take TileProductMmaSync's element loads");
    const uint32_t smem = static_cast<uint32_t>(__cvta_generic_to_shared(smem_bytes));
    const int k_slices = static_cast<int>((d + kBK - 1) / kBK);
    const int lane = threadIdx.x % 32;
    // This lane's ldmatrix addresses within a stage, for columns 0-15 of the
    // slice; columns 16-31 are chunk + 2, i.e. the byte offset XOR 32.
    const uint32_t swizzle = (lane >> 1) & 3;  // (row / 2) mod 4 of every row this lane addresses
    const uint32_t a_frag = (warp_m() * kWarpRows + lane % 16) * kRowBytes + (((lane / 16) ^ swizzle) * 16);
    const uint32_t b_frag = kOperandBytes + (warp_n() * kWarpCols + lane % 8 + (lane / 16) * 8) * kRowBytes +
                            ((((lane / 8) % 2) ^ swizzle) * 16);
    const int part = threadIdx.x % 4, first_row = threadIdx.x / 4;
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      const int64_t col0 = t * kBN;
      SliceSource src;
      src.a_rows = static_cast<int>(min(rows_a - row0 - first_row, int64_t{kBM}));
      src.b_rows = static_cast<int>(min(rows_b - col0 - first_row, int64_t{kBN}));
      src.a = a + (src.a_rows > 0 ? (row0 + first_row) * d + part * 8 : 0);
      src.b = b + (src.b_rows > 0 && b_rows == nullptr ? (col0 + first_row) * d + part * 8 : 0);
      zero();
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_slices) load_slice(src, b, b_rows, col0, d, s, smem + s * kStageBytes);
        commit();
      }
      wait_for_slice();
      __syncthreads();
      uint32_t af[2][kMTiles][4], bf[2][kNTiles][2];
      load_fragments(af[0], bf[0], smem, a_frag, b_frag, 0);
      for (int kt = 0; kt < k_slices; ++kt) {
        // Slice kt + 3 goes to the stage slice kt − 1 used: every warp read
        // its last fragments of slice kt − 1 before the previous barrier.
        const int next = kt + kStages - 1;
        const uint32_t stage = smem + (kt % kStages) * kStageBytes;
        load_fragments(af[1], bf[1], stage, a_frag, b_frag, 32);
        if (next < k_slices)
          load_slice(src, b, b_rows, col0, d, next, smem + (next % kStages) * kStageBytes);
        commit();
        multiply(af[0], bf[0]);
        wait_for_slice();  // slice kt + 1 has landed (this thread's copies) ...
        __syncthreads();   // ... and every thread's
        if (kt + 1 < k_slices)
          load_fragments(af[0], bf[0], smem + ((kt + 1) % kStages) * kStageBytes, a_frag, b_frag, 0);
        multiply(af[1], bf[1]);
      }
      wait_all();
      __syncthreads();  // the next tile's first slices overwrite stages that slow warps may still read
      on_tile(col0);
    }
  }

 private:
  __device__ __forceinline__ static void commit() { asm volatile("cp.async.commit_group;\n" ::); }
  // At most kStages − 2 groups in flight: with the prologue's kStages − 1
  // groups and one per slice since, the group of the next slice is complete.
  __device__ __forceinline__ static void wait_for_slice() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
  }
  __device__ __forceinline__ static void wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

  // Where this thread's copies of a tile come from: chunk i % 4 of rows
  // i / 4 + 32j of both operands (thread i of 128), j = 0..3. Kept as one
  // pointer per operand and a count of valid rows, to spare registers.
  struct SliceSource {
    const __nv_bfloat16* a;  // A[row0 + i/4, 8·(i%4)], advanced by kBK per slice
    const __nv_bfloat16* b;  // the same in B (or its gathered rows: see b_rows)
    int a_rows, b_rows;      // rows i/4 + 32j exist for 32j < a_rows (b_rows)
  };
  static constexpr int kRowsPerPass = kThreads / 4;

  // One slice (BK columns of D) of both operands: 256 rows × 4 chunks of 16
  // bytes, 8 chunks per thread, all at one swizzled chunk position.
  __device__ __forceinline__ static void load_slice(const SliceSource& src, const __nv_bfloat16* b, const int* b_rows,
                                                    int64_t col0, int64_t d, int kt, uint32_t stage) {
    const int part = threadIdx.x % 4, first_row = threadIdx.x / 4;
    const int64_t k = static_cast<int64_t>(kt) * kBK;
    const bool k_valid = k + part * 8 < d;  // d % 8 == 0: a chunk is all in or all out
    const uint32_t dst = stage + first_row * kRowBytes + ((part ^ ((first_row >> 1) & 3)) * 16);
#pragma unroll
    for (int j = 0; j < kBM / kRowsPerPass; ++j) {
      const bool valid = k_valid && j * kRowsPerPass < src.a_rows;
      cp_async_16(dst + j * kRowsPerPass * kRowBytes, valid ? src.a + j * kRowsPerPass * d + k : src.a, valid);
    }
#pragma unroll
    for (int j = 0; j < kBN / kRowsPerPass; ++j) {
      const bool valid = k_valid && j * kRowsPerPass < src.b_rows;
      const __nv_bfloat16* p = src.b + j * kRowsPerPass * d + k;
      if (b_rows != nullptr && valid) p = b + b_rows[col0 + first_row + j * kRowsPerPass] * d + k + part * 8;
      cp_async_16(dst + kOperandBytes + j * kRowsPerPass * kRowBytes, valid ? p : b, valid);
    }
  }

  // The A fragments of the warp's 4 m16 tiles and the B fragments of its 8
  // n8 tiles for 16 columns of the slice (half = 0: columns 0-15, 32: 16-31).
  __device__ __forceinline__ static void load_fragments(uint32_t (&af)[kMTiles][4], uint32_t (&bf)[kNTiles][2],
                                                        uint32_t stage, uint32_t a_frag, uint32_t b_frag,
                                                        uint32_t half) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) ldmatrix_x4_shared(af[mt], stage + ((a_frag + mt * 16 * kRowBytes) ^ half));
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t r[4];
      ldmatrix_x4_shared(r, stage + ((b_frag + np * 16 * kRowBytes) ^ half));
      bf[2 * np][0] = r[0];
      bf[2 * np][1] = r[1];
      bf[2 * np + 1][0] = r[2];
      bf[2 * np + 1][1] = r[3];
    }
  }

  __device__ __forceinline__ void multiply(const uint32_t (&af)[kMTiles][4], const uint32_t (&bf)[kNTiles][2]) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt) mma_bf16(acc[mt][nt], af[mt], bf[nt]);
  }
};

}  // namespace cce
