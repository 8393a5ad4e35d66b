// The tile product: one thread block computes a logits tile
//   Z[BM rows of E, BN rows of C] = E_tile · C_tileᵀ
// over the whole hidden dimension D, on chip, in fp32.
//
// bf16 (TileProductBf16): tensor cores through mma.sync.m16n8k16 (fp32
// accumulation). Tiles of E and C, BK = 32 columns of D at a time, are staged
// in shared memory by cp.async, kStages deep, so the loads of later slices
// overlap the products of the current one. Each of the 8 warps owns a 64×32
// piece of the 128×128 tile: 4×4 mma tiles of 16×8, i.e. 64 fp32 accumulators
// per thread. ldmatrix moves 8×8 sub-tiles from shared memory into the
// fragment layout mma expects; shared-memory rows are padded from 64 to 80
// bytes so that its eight row addresses fall in distinct banks.
//
// fp32 (TileProductFp32): the simpler path, a classic shared-memory tiled
// FFMA product, 64×64 tiles, a 4×4 micro-tile per thread.
//
// Both expose the tile the same way: each thread holds kRows × kCols values
// z[r][c] whose tile-relative row and column are row_of(r) and col_of(c).
// Stages 03 to 07 fold these values (online softmax, gradients) without
// caring which product made them.
//
// Rows of E past N, rows of C past V and columns past D are loaded as zeros:
// the caller masks columns past V. When D is not a multiple of 8 (16-byte
// rows are then misaligned) the loads fall back to plain element loads.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

// The two warp-level instructions of the mma.sync paths (stage 03's tile
// product, stage 06's backward products):
//   ldmatrix_x4: four 8×8 bf16 sub-tiles from shared memory into the fragment
//                layout mma expects (transposed on the way with `transpose`);
//   mma_bf16:    c[16×8] += a[16×16] · b[16×8], bf16 in, fp32 accumulate.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* p, bool transpose = false) {
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(p));
  if (transpose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// ---------------------------------------------------------------- bf16 path
struct TileProductBf16 {
  static constexpr int kBM = 128, kBN = 128, kBK = 32, kStages = 4, kThreads = 256, kMinBlocksPerSm = 2;
  static constexpr int kPitch = kBK + 8;  // bf16 elements per shared-memory row (+16 bytes against bank conflicts)
  static constexpr int kWarpRows = 64, kWarpCols = 32;
  static constexpr int kMTiles = kWarpRows / 16, kNTiles = kWarpCols / 8;
  // Per thread: rows (mt, half) and columns (nt, pair element).
  static constexpr int kRows = kMTiles * 2, kCols = kNTiles * 2;
  static constexpr size_t kStageElems = static_cast<size_t>(kBM + kBN) * kPitch;
  static constexpr size_t kSharedBytes = kStageElems * kStages * sizeof(__nv_bfloat16);

  float acc[kMTiles][kNTiles][4];
  // Optional order of B's rows (stage 07's sorted vocabulary): tile position
  // p reads row b_order[p] of C. Null: the natural order.
  const int* b_order = nullptr;

  __device__ __forceinline__ static int warp_m() { return (threadIdx.x / 32) % 2; }
  __device__ __forceinline__ static int warp_n() { return (threadIdx.x / 32) / 2; }
  // Tile-relative row of z(r, ·) and column of z(·, c).
  __device__ __forceinline__ static int row_of(int r) {
    return warp_m() * kWarpRows + (r / 2) * 16 + (r % 2) * 8 + (threadIdx.x % 32) / 4;
  }
  __device__ __forceinline__ static int col_of(int c) {
    return warp_n() * kWarpCols + (c / 2) * 8 + (threadIdx.x % 4) * 2 + (c % 2);
  }
  __device__ __forceinline__ float& z(int r, int c) { return acc[r / 2][c / 2][(r % 2) * 2 + (c % 2)]; }
  // The kRowSharers threads that hold pieces of one tile row, numbered 0..15:
  // the 4 lanes of a quad times the 4 warps along the columns.
  static constexpr int kRowSharers = 16;
  __device__ __forceinline__ static int sharer_index() { return warp_n() * 4 + threadIdx.x % 4; }

  // For each vocabulary tile t in [tile_begin, tile_end): computes the tile
  // of rows [row0, row0+BM) of A = E [rows_a, d] and rows [t·BN, t·BN+BN) of
  // B = C [rows_b, d] into the accumulators, then calls on_tile(t·BN) (the
  // accumulators hold the tile; on_tile may overwrite them, not `smem`).
  // Each tile fills the cp.async pipeline anew. (Running the pipeline across
  // tile boundaries measured 7% slower on an H200: the loop body grows and the
  // compiler schedules the products worse.)
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const __nv_bfloat16* __restrict__ b, int64_t rows_b, int64_t tile_begin,
                                int64_t tile_end, int64_t d, unsigned char* smem_bytes, OnTile&& on_tile) {
    __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(smem_bytes);
    const int k_tiles = static_cast<int>((d + kBK - 1) / kBK);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      zero();
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s) {
        if (s < k_tiles) load_stage<kAligned>(a, rows_a, row0, b, rows_b, b_order, t * kBN, d, s, smem + s * kStageElems);
        commit();
      }
      for (int kt = 0; kt < k_tiles; ++kt) {
        wait_for_stage();
        __syncthreads();
        const int next = kt + kStages - 1;
        if (next < k_tiles)
          load_stage<kAligned>(a, rows_a, row0, b, rows_b, b_order, t * kBN, d, next,
                               smem + (next % kStages) * kStageElems);
        commit();
        multiply_stage(smem + (kt % kStages) * kStageElems);
      }
      wait_all();
      __syncthreads();
      on_tile(t * kBN);
    }
  }

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
  }

 private:
  __device__ __forceinline__ static void commit() { asm volatile("cp.async.commit_group;\n" ::); }
  __device__ __forceinline__ static void wait_for_stage() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
  }
  __device__ __forceinline__ static void wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

  // 16 bytes (8 bf16) from global to shared, zero-filled when !valid.
  __device__ __forceinline__ static void copy16(__nv_bfloat16* dst, const __nv_bfloat16* src, bool valid) {
    const unsigned dst_addr = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    const int src_bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_addr), "l"(src), "r"(src_bytes));
  }

  // One BK-wide slice of both operands: (BM + BN) rows × 4 chunks of 16 bytes.
  template <bool kAligned>
  __device__ __forceinline__ static void load_stage(const __nv_bfloat16* a, int64_t rows_a, int64_t row0,
                                                    const __nv_bfloat16* b, int64_t rows_b, const int* order,
                                                    int64_t col0, int64_t d,
                                                    int kt, __nv_bfloat16* stage) {
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
      if (!is_a && order != nullptr && row < rows) row = order[row];
      const __nv_bfloat16* base = is_a ? a : b;
      const int64_t k = k0 + part * 8;
      __nv_bfloat16* dst = stage + tile_row * kPitch + part * 8;
      if constexpr (kAligned) {
        const bool valid = row < rows && k < d;  // d % 8 == 0: a chunk is all in or all out
        copy16(dst, valid ? base + row * d + k : base, valid);
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

// ---------------------------------------------------------------- fp32 path
struct TileProductFp32 {
  static constexpr int kBM = 64, kBN = 64, kBK = 16, kThreads = 256, kMinBlocksPerSm = 2;
  static constexpr int kRows = 4, kCols = 4;
  static_assert(kBM == kBN, "one loop loads both operand tiles");
  static constexpr size_t kSharedBytes = static_cast<size_t>(kBK) * (kBM + kBN + 2) * sizeof(float);
  static_assert(kSharedBytes % 16 == 0, "callers place more shared memory after the tile's");

  float acc[kRows][kCols];
  const int* b_order = nullptr;  // as in TileProductBf16

  // Thread (tx, ty) of a 16×16 grid owns rows ty + 16r and columns tx + 16c:
  // a warp's loads from shared memory then hit consecutive addresses.
  __device__ __forceinline__ static int row_of(int r) { return threadIdx.x / 16 + 16 * r; }
  __device__ __forceinline__ static int col_of(int c) { return threadIdx.x % 16 + 16 * c; }
  __device__ __forceinline__ float& z(int r, int c) { return acc[r][c]; }
  static constexpr int kRowSharers = 16;
  __device__ __forceinline__ static int sharer_index() { return threadIdx.x % 16; }

  // Same contract as TileProductBf16::for_each_tile (kAligned is unused:
  // the fp32 loads are element-wise), without a cross-tile pipeline.
  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const float* __restrict__ a, int64_t rows_a, int64_t row0,
                                const float* __restrict__ b, int64_t rows_b, int64_t tile_begin, int64_t tile_end,
                                int64_t d, unsigned char* smem_bytes, OnTile&& on_tile) {
    float* smem = reinterpret_cast<float*>(smem_bytes);
    for (int64_t t = tile_begin; t < tile_end; ++t) {
      compute_tile(a, rows_a, row0, b, rows_b, t * kBN, d, smem);
      on_tile(t * kBN);
    }
  }

  __device__ void compute_tile(const float* __restrict__ a, int64_t rows_a, int64_t row0,
                               const float* __restrict__ b, int64_t rows_b, int64_t col0, int64_t d, float* smem) {
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
        const int64_t gr = row0 + row, gk = k0 + k;
        sa[k * (kBM + 1) + row] = (gr < rows_a && gk < d) ? a[gr * d + gk] : 0.0f;
        int64_t gc = col0 + row;
        if (gc < rows_b && b_order != nullptr) gc = b_order[gc];
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

// The portable product for an element type (Hopper's wgmma path is in
// tile_product_wgmma.cuh; the kernels choose between them at launch).
template <typename T>
struct TileProductFor;
template <>
struct TileProductFor<__nv_bfloat16> {
  using type = TileProductBf16;
};
template <>
struct TileProductFor<float> {
  using type = TileProductFp32;
};

}  // namespace cce
