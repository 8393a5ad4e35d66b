// The tile product on Hopper's warpgroup tensor-core instructions (wgmma).
//
// Same contract as TileProductBf16 (tile_product.cuh) for a 128×128 logits
// tile over the whole D, but the products are wgmma.mma_async m64n128k16:
// each of the two warpgroups (128 threads) of the block multiplies its 64
// rows of E by all 128 rows of C straight out of shared memory, 16 columns of
// D per instruction, into 64 fp32 accumulators per thread. The operands stay
// in shared memory (no ldmatrix, no register staging), which is what lets
// Hopper's tensor cores run at full rate; mma.sync cannot.
//
// Shared memory holds kStages slices of BK = 64 columns of D. Each 64-column
// row is 128 bytes; rows are stored with the 128-byte swizzle wgmma expects:
// the 16-byte chunk c of row r lands at chunk c ^ (r mod 8), so that the
// eight rows of a core matrix hit different banks. A matrix descriptor (start
// address, 1024 bytes between groups of 8 rows, swizzle mode) tells wgmma
// that layout; stepping 16 columns of D is +32 bytes on the start address.
//
// Needs sm_90a (CCE_HAVE_WGMMA); D a multiple of 8 (16-byte copies).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

#ifndef CCE_WGMMA_STAGES
#define CCE_WGMMA_STAGES 3
#endif
#ifndef CCE_WGMMA_IN_FLIGHT
#define CCE_WGMMA_IN_FLIGHT 0
#endif
struct TileProductWgmma {
  static constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = CCE_WGMMA_STAGES, kThreads = 256;
  // wgmma groups left running while the next slice is prepared (0 or 1); the
  // loads then run kStages − 1 − kInFlight slices ahead.
  static constexpr int kInFlight = CCE_WGMMA_IN_FLIGHT, kAhead = kStages - 1 - kInFlight;
  static_assert(kAhead >= 1, "at least one slice must load ahead");
  static constexpr int kMinBlocksPerSm = kStages <= 3 ? 2 : 1;
  static constexpr int kRows = 2, kCols = 32;  // per thread: rows lane/4 (+8), 16 n8 blocks × 2
  static constexpr int kRowSharers = 4;        // the 4 lanes of a quad hold pieces of one row
  static constexpr int kRowBytes = kBK * 2;    // 128: one swizzle row
  static constexpr int kOperandBytes = kBM * kRowBytes;  // 16 KB (A and B alike: kBM == kBN)
  static constexpr int kStageBytes = 2 * kOperandBytes;
  // +1024: the swizzled tiles must start on a 1024-byte boundary.
  static constexpr size_t kSharedBytes = static_cast<size_t>(kStageBytes) * kStages + 1024;
  static_assert(kBM == kBN, "A and B tiles share one layout");

  float d[64];
  const int* b_order = nullptr;  // as in TileProductBf16

  __device__ __forceinline__ static int warpgroup() { return threadIdx.x / 128; }
  __device__ __forceinline__ static int row_of(int r) {
    return warpgroup() * 64 + ((threadIdx.x / 32) % 4) * 16 + (threadIdx.x % 32) / 4 + 8 * r;
  }
  __device__ __forceinline__ static int col_of(int c) { return (c / 2) * 8 + (threadIdx.x % 4) * 2 + (c % 2); }
  __device__ __forceinline__ float& z(int r, int c) { return d[(c / 2) * 4 + r * 2 + (c % 2)]; }
  __device__ __forceinline__ static int sharer_index() { return threadIdx.x % 4; }

  template <bool kAligned, class OnTile>
  __device__ void for_each_tile(const __nv_bfloat16* __restrict__ a, int64_t rows_a, int64_t row0,
                                const __nv_bfloat16* __restrict__ b, int64_t rows_b, int64_t tile_begin,
                                int64_t tile_end, int64_t dim, unsigned char* smem_raw, OnTile&& on_tile) {
    static_assert(kAligned, "the wgmma path needs 16-byte aligned rows");
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
    const uint32_t base = (raw + 1023u) & ~1023u;
    const int k_tiles = static_cast<int>((dim + kBK - 1) / kBK);
    int64_t load_tile = tile_begin;
    int load_kt = 0, load_buffer = 0, buffer = 0;
    auto load_next = [&] {
      if (load_tile < tile_end) {
        load_stage(a, rows_a, row0, b, rows_b, b_order, load_tile * kBN, dim, load_kt,
                   base + load_buffer * kStageBytes);
        if (++load_kt == k_tiles) load_kt = 0, ++load_tile;
        if (++load_buffer == kStages) load_buffer = 0;
      }
      asm volatile("cp.async.commit_group;\n" ::);
    };
#pragma unroll
    for (int s = 0; s < kAhead; ++s) load_next();
    for (int64_t t = tile_begin; t < tile_end; ++t) {
#pragma unroll
      for (int i = 0; i < 64; ++i) d[i] = 0.0f;
      for (int kt = 0; kt < k_tiles; ++kt) {
        asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1));
        // cp.async wrote through the generic proxy; wgmma reads through the async one.
        asm volatile("fence.proxy.async.shared::cta;\n" ::);
        __syncthreads();
        load_next();
        const uint32_t stage = base + buffer * kStageBytes;
        const uint64_t desc_a = descriptor(stage + warpgroup() * 64 * kRowBytes);
        const uint64_t desc_b = descriptor(stage + kOperandBytes);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int ks = 0; ks < kBK / 16; ++ks) mma(desc_a + 2 * ks, desc_b + 2 * ks);  // +32 bytes per 16 columns
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // The buffer the next load overwrites was read kInFlight + 1 slices
        // ago; the tile's accumulators are complete only when nothing runs.
        if (kInFlight > 0 && kt + 1 < k_tiles)
          asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kInFlight) : "memory");
        else
          asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
        if (++buffer == kStages) buffer = 0;
      }
      on_tile(t * kBN);
    }
    asm volatile("cp.async.wait_group 0;\n" ::);
    __syncthreads();
#else
    (void)a, (void)rows_a, (void)row0, (void)b, (void)rows_b, (void)tile_begin, (void)tile_end, (void)dim,
        (void)smem_raw, (void)on_tile;
    __trap();  // built without sm_90a: the host never launches this path
#endif
  }

 private:
  // K-major operand, 128-byte swizzle: start address >> 4, leading byte offset
  // (unused with this swizzle, 1 by convention), 1024 bytes between 8-row groups.
  __device__ __forceinline__ static uint64_t descriptor(uint32_t address) {
    return static_cast<uint64_t>((address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
           (uint64_t{1} << 62);
  }

  // One BK-wide slice of both operands, written swizzled: (BM + BN) rows × 8
  // chunks of 16 bytes, 8 per thread; rows past N or V and columns past D are zeros.
  __device__ __forceinline__ static void load_stage(const __nv_bfloat16* a, int64_t rows_a, int64_t row0,
                                                    const __nv_bfloat16* b, int64_t rows_b, const int* order,
                                                    int64_t col0, int64_t dim,
                                                    int kt, uint32_t stage) {
    constexpr int kChunks = (kBM + kBN) * 8;
#pragma unroll
    for (int i = 0; i < kChunks / kThreads; ++i) {
      const int chunk = threadIdx.x + i * kThreads;
      const int tile_row = chunk / 8, part = chunk % 8;
      const bool is_a = tile_row < kBM;
      const int r = is_a ? tile_row : tile_row - kBM;
      int64_t row = is_a ? row0 + r : col0 + r;
      const int64_t k = static_cast<int64_t>(kt) * kBK + part * 8;
      const bool valid = row < (is_a ? rows_a : rows_b) && k < dim;
      if (!is_a && order != nullptr && valid) row = order[row];
      const __nv_bfloat16* src = valid ? (is_a ? a : b) + row * dim + k : a;
      const uint32_t dst = stage + (is_a ? 0 : kOperandBytes) + r * kRowBytes + ((part ^ (r & 7)) * 16);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
    }
  }

  __device__ __forceinline__ void mma(uint64_t desc_a, uint64_t desc_b) {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // scale-d = 1 (accumulate into d), scale-a = scale-b = 1, both operands K-major.
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(desc_a), "l"(desc_b));
#else
    (void)desc_a, (void)desc_b;
#endif
  }
};

}  // namespace cce
