// The two warp-level tensor-core instructions of the mma.sync paths (the
// tile product of tile_mma_sync.cuh, stage 06's backward products):
//   ldmatrix_x4: four 8×8 bf16 sub-tiles from shared memory into the
//                fragment layout mma expects (transposed on the way with `transpose`);
//   mma_bf16:    c[16×8] += a[16×16] · b[16×8], bf16 in, fp32 accumulate.
//
// The accumulator fragment of one mma.sync.m16n8k16 (fp32), over a warp:
//
//              cols 0 1   cols 2 3   cols 4 5   cols 6 7
//     row  0  | lane 0  | lane 1   | lane 2   | lane 3   |  c[0], c[1]
//     row  1  | lane 4  | lane 5   | lane 6   | lane 7   |
//      ...    |   ...   |   ...    |   ...    |   ...    |
//     row  7  | lane 28 | lane 29  | lane 30  | lane 31  |
//     row  8  | lane 0  | lane 1   | lane 2   | lane 3   |  c[2], c[3]
//      ...    |   ...   |   ...    |   ...    |   ...    |
//     row 15  | lane 28 | lane 29  | lane 30  | lane 31  |
//
// Lane l holds row l/4, columns 2(l%4) and 2(l%4)+1 in c[0], c[1], and the
// same columns of row l/4 + 8 in c[2], c[3]. Every row_of/col_of of the tile
// products is this picture, repeated over a warp's grid of m16n8 tiles (and,
// for wgmma, over the 4 warps of a warpgroup, 16 rows each).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

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

// The same from a shared-memory address (the forward product computes its addresses there).
__device__ __forceinline__ void ldmatrix_x4_shared(uint32_t (&r)[4], uint32_t addr) {
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

// The accumulators of a block whose kWarpsM × kWarpsN warps each hold a
// kWarpRows × kWarpCols piece of the tile (warp w at row kWarpRows·(w mod
// kWarpsM), column kWarpCols·(w / kWarpsM)), as a grid of m16n8 fragments:
// the fragment contract's z, row_of, col_of and sharers for both mma.sync
// products (tile_mma_sync.cuh, tile_mma_sync_forward.cuh).
template <int kWarpRowsT, int kWarpColsT, int kWarpsM, int kWarpsN>
struct MmaSyncWarpGrid {
  static constexpr int kWarpRows = kWarpRowsT, kWarpCols = kWarpColsT;
  static constexpr int kMTiles = kWarpRows / 16, kNTiles = kWarpCols / 8;
  // Per thread: rows (mt, half) and columns (nt, pair element).
  static constexpr int kRows = kMTiles * 2, kCols = kNTiles * 2;
  // The threads that hold pieces of one tile row: a quad in each warp along the columns.
  static constexpr int kRowSharers = 4 * kWarpsN;

  float acc[kMTiles][kNTiles][4];

  __device__ __forceinline__ static int warp_m() { return (threadIdx.x / 32) % kWarpsM; }
  __device__ __forceinline__ static int warp_n() { return (threadIdx.x / 32) / kWarpsM; }
  // Tile-relative row of z(r, ·) and column of z(·, c) (the picture above).
  __device__ __forceinline__ static int row_of(int r) {
    return warp_m() * kWarpRows + (r / 2) * 16 + (r % 2) * 8 + (threadIdx.x % 32) / 4;
  }
  __device__ __forceinline__ static int col_of(int c) {
    return warp_n() * kWarpCols + (c / 2) * 8 + (threadIdx.x % 4) * 2 + (c % 2);
  }
  __device__ __forceinline__ float& z(int r, int c) { return acc[r / 2][c / 2][(r % 2) * 2 + (c % 2)]; }
  __device__ __forceinline__ static int sharer_index() { return warp_n() * 4 + threadIdx.x % 4; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
  }
};

// 16 bytes (8 bf16) from global to shared memory, zero-filled when !valid.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

}  // namespace cce
