// The block-level tile product on Hopper's wgmma (sm_90a), loaded with cp.async.
//
// Same contract as TileProductMmaSync (tile_mma_sync.cuh) for a 128×128
// logits tile over the whole D, but the products are wgmma.mma_async
// m64n128k16 (wgmma.cuh): each of the two warpgroups of the block multiplies
// its 64 rows of A by all 128 rows of B straight out of shared memory, 16
// columns of D per instruction, into 64 fp32 accumulators per thread.
//
// Every thread of the block both loads (cp.async, written into the 128-byte
// swizzle by hand) and multiplies, and the whole block meets at a barrier for
// every slice of BK = 64 columns of D. That simplicity costs speed; the
// forward uses the warp-specialized pipeline of wgmma_pipeline.cuh instead.
// This product remains the one the backward stages recompute their tiles
// with, since they need the block's whole shared memory after each tile.
//
// Needs sm_90a (CCE_HAVE_WGMMA); D a multiple of 8 (16-byte copies).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/mma_sync.cuh"
#include "common/tile/team.cuh"
#include "common/tile/wgmma.cuh"

namespace cce {

struct TileProductWgmma {
  static constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 3, kThreads = 256;
  static constexpr int kAhead = kStages - 1;  // slices loaded ahead of the one being multiplied
  static constexpr int kMinBlocksPerSm = 2;
  static constexpr int kRows = 2, kCols = 32;  // per thread: rows lane/4 (+8), 16 n8 blocks × 2
  static constexpr int kRowSharers = 4;        // the 4 lanes of a quad hold pieces of one row
  static constexpr int kRowBytes = kBK * 2;    // 128: one swizzle row
  static constexpr int kOperandBytes = kBM * kRowBytes;  // 16 KB (A and B alike: kBM == kBN)
  static constexpr int kStageBytes = 2 * kOperandBytes;
  // +1024: the swizzled tiles must start on a 1024-byte boundary.
  static constexpr size_t kSharedBytes = static_cast<size_t>(kStageBytes) * kStages + 1024;
  static_assert(kBM == kBN, "A and B tiles share one layout");
  using Team = BlockTeam;
  static constexpr int kTeamThreads = kThreads;
  // Whether the 8 lanes with the same lane % 4 hold the same columns (column_sums.cuh).
  static constexpr bool kColumnsShareLaneMod4 = true;
  static constexpr int kTeamRows = kBM;
  __device__ __forceinline__ static int team_row0() { return 0; }

  float d[64];

  __device__ __forceinline__ static int warpgroup() { return threadIdx.x / 128; }
  __device__ __forceinline__ static int row_of(int r) {
    return warpgroup() * 64 + ((threadIdx.x / 32) % 4) * 16 + (threadIdx.x % 32) / 4 + 8 * r;
  }
  __device__ __forceinline__ static int col_of(int c) { return (c / 2) * 8 + (threadIdx.x % 4) * 2 + (c % 2); }
  __device__ __forceinline__ float& z(int r, int c) { return d[(c / 2) * 4 + r * 2 + (c % 2)]; }
  __device__ __forceinline__ static int sharer_index() { return threadIdx.x % 4; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.0f;
  }

  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const __nv_bfloat16* __restrict__ b, int64_t rows_b, const int* __restrict__ b_rows,
                                int64_t tile_begin, int64_t tile_end, int64_t dim, unsigned char* smem_raw,
                                OnTile&& on_tile) {
    for_each_tile<kAligned>(a, rows_a, row0, nullptr, b, rows_b, b_rows, tile_begin, tile_end, dim, smem_raw, on_tile);
  }
  // A's rows gathered too: with a_rows, tile row r reads row a_rows[row0 + r] of A.
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const int* __restrict__ a_rows, const __nv_bfloat16* __restrict__ b, int64_t rows_b,
                                const int* __restrict__ b_rows, int64_t tile_begin, int64_t tile_end, int64_t dim,
                                unsigned char* smem_raw, OnTile&& on_tile) {
    static_assert(kAligned, "the wgmma path needs 16-byte aligned rows");
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    const uint32_t base = (raw + 1023u) & ~1023u;
    const int k_tiles = static_cast<int>((dim + kBK - 1) / kBK);
    int64_t load_tile = tile_begin;
    int load_kt = 0, load_buffer = 0, buffer = 0;
    // This thread's rows of A (the same for every tile) and of B in load_tile (gathered once per tile), as
    // offsets in 16-byte chunks, so that a slice's copy costs an add per chunk.
    uint32_t a_src[kChunksPerThread / 2], b_src[kChunksPerThread / 2];
#pragma unroll
    for (int i = 0; i < kChunksPerThread / 2; ++i) {
      const int64_t row = row0 + chunk_row(i);
      a_src[i] = row < rows_a ? chunk_offset(a_rows != nullptr ? a_rows[row] : row, dim) : kNoRow;
    }
    auto load_next = [&] {
      if (load_tile < tile_end) {
        if (load_kt == 0) find_b_rows(rows_b, b_rows, load_tile * kBN, dim, b_src);
        load_stage(a, a_src, b, b_src, dim, load_kt, base + load_buffer * kStageBytes);
        if (++load_kt == k_tiles) load_kt = 0, ++load_tile;
        if (++load_buffer == kStages) load_buffer = 0;
      }
      asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int s = 0; s < kAhead; ++s) load_next();
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1));
        // cp.async wrote through the generic proxy; wgmma reads through the async one.
        asm volatile("fence.proxy.async.shared::cta;\n" ::);
        __syncthreads();
        load_next();
        const uint32_t stage = base + buffer * kStageBytes;
        const uint64_t desc_a = wgmma_descriptor(stage + warpgroup() * 64 * kRowBytes);
        const uint64_t desc_b = wgmma_descriptor(stage + kOperandBytes);
        wgmma_arrive();
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) wgmma_m64n128k16(d, desc_a + 2 * ks, desc_b + 2 * ks, kt > 0 || ks > 0);
        wgmma_commit();
        // The next iteration's load overwrites a buffer this one read.
        wgmma_wait<0>();
        wgmma_fence_operands(d);
        if (++buffer == kStages) buffer = 0;
      }
      on_tile(t * kBN);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
#else
    (void)a, (void)rows_a, (void)row0, (void)a_rows, (void)b, (void)rows_b, (void)b_rows, (void)tile_begin,
        (void)tile_end, (void)dim, (void)smem_raw, (void)on_tile;
    __trap();  // built without sm_90a: the host never launches this path
#endif
  }

 private:
  // A thread copies kChunksPerThread 16-byte chunks of a slice: its first
  // half from rows of A, its second from rows of B (kBM == kBN).
  static constexpr int kChunksPerThread = (kBM + kBN) * 8 / kThreads;
  static_assert(kBM * 8 == kThreads * kChunksPerThread / 2, "A's rows are the first half of every thread's chunks");
  __device__ __forceinline__ static int chunk_row(int i) { return (threadIdx.x + i * kThreads) / 8; }

  // Where a thread's chunks start: row · D / 8 in 16-byte chunks (D is a multiple of 8 on this path), or
  // kNoRow past N or V. 32 bits hold any row · D / 8 below 2^32 (rows · D < 3.4e10).
  static constexpr uint32_t kNoRow = 0xffffffffu;
  __device__ __forceinline__ static uint32_t chunk_offset(int64_t row, int64_t dim) {
    return static_cast<uint32_t>(row * (dim / 8));
  }

  // This thread's rows of B for the tile at col0 (through the gather b_rows when given).
  __device__ __forceinline__ static void find_b_rows(int64_t rows_b, const int* b_rows, int64_t col0, int64_t dim,
                                                     uint32_t (&b_src)[kChunksPerThread / 2]) {
#pragma unroll
    for (int i = 0; i < kChunksPerThread / 2; ++i) {
      const int64_t row = col0 + chunk_row(i + kChunksPerThread / 2) - kBM;
      b_src[i] = row < rows_b ? chunk_offset(b_rows != nullptr ? b_rows[row] : row, dim) : kNoRow;
    }
  }

  // One BK-wide slice of both operands, written swizzled: (BM + BN) rows × 8 chunks of 16 bytes, 8 per thread,
  // from the chunks a_src and b_src name; rows past N or V and columns past D are zeros. A thread's chunks lie
  // 32 rows apart, so all of them share one swizzle (row % 8) and sit 4 KB apart in the stage.
  __device__ __forceinline__ static void load_stage(const __nv_bfloat16* a, const uint32_t (&a_src)[kChunksPerThread / 2],
                                                    const __nv_bfloat16* b, const uint32_t (&b_src)[kChunksPerThread / 2],
                                                    int64_t dim, int kt, uint32_t stage) {
    const int part = threadIdx.x % 8, row = threadIdx.x / 8;
    const uint32_t column = static_cast<uint32_t>(kt * (kBK / 8) + part);  // in 16-byte chunks
    const bool column_in_d = static_cast<int64_t>(column) * 8 < dim;
    const uint32_t first = stage + row * kRowBytes + ((part ^ (row & 7)) * 16);
    static_assert(kThreads / 8 * kRowBytes == 4096, "a thread's chunks lie 4 KB apart");
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const bool is_a = i < kChunksPerThread / 2;
      const uint32_t src = is_a ? a_src[i] : b_src[i - kChunksPerThread / 2];
      const bool valid = src != kNoRow && column_in_d;
      const int4* from = reinterpret_cast<const int4*>(is_a ? a : b);
      cp_async_16(first + i * 4096, valid ? from + (src + column) : from, valid);
    }
  }
};

}  // namespace cce
