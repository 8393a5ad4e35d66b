// The tile engine's backward products (stages 06 and 07): the two products of
// one (token block × vocabulary block) tile,
// given S = dloss/dlogits of the tile in shared memory:
//   dE[token block, :] += S · C[vocabulary block, :]
//   dC[vocabulary block, :] += Sᵀ · E[token block, :]
// D is walked in chunks of 64 columns: each chunk of C and E is staged in
// shared memory, both products run, and the results are added into fp32
// accumulation buffers with atomics (other blocks add into the same rows).
//
// bf16 (BackwardProductsBf16, 128×128 tiles): S is stored in bf16 and the
// products run on tensor cores with mma.sync. S·C reads S row-major as the A
// operand and the C chunk, stored [vocab][d], through ldmatrix.trans as B;
// Sᵀ·E reads S through ldmatrix.trans as A (the transpose costs nothing) and
// the E chunk through ldmatrix.trans as B. 8 warps, each a 32×32 piece of
// the 128×64 chunk of both products.
// fp32 (BackwardProductsFp32, 64×64 tiles): the same with FFMA loops.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/tile/mma_sync.cuh"  // ldmatrix_x4, mma_bf16

namespace cce {

// Adds (x, y) into dst[0], dst[1]: one vector atomic when the address allows.
__device__ __forceinline__ void atomic_add_pair(float* dst, float x, float y, bool pair_aligned) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (pair_aligned) {
    atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
    return;
  }
#else
  (void)pair_aligned;
#endif
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
}

struct BackwardProductsBf16 {
  static constexpr int kBM = 128, kBN = 128, kChunk = 64, kThreads = 256;
  static constexpr int kSPitch = kBN + 8;         // bf16 per S row (272 bytes: conflict-free ldmatrix)
  static constexpr int kChunkPitch = kChunk + 8;  // bf16 per chunk row (144 bytes)
  static constexpr size_t kSBytes = static_cast<size_t>(kBM) * kSPitch * 2;
  static constexpr size_t kChunkBytes = static_cast<size_t>(kBM) * kChunkPitch * 2;
  static constexpr size_t kSharedBytes = kSBytes + 2 * kChunkBytes;
  using Scalar = __nv_bfloat16;

  __nv_bfloat16* s;   // [kBM tokens][kSPitch]: S, written by the caller
  __nv_bfloat16* c_chunk;  // [kBN vocab][kChunkPitch]: C[vocab block, chunk]
  __nv_bfloat16* e_chunk;  // [kBM tokens][kChunkPitch]: E[token block, chunk]

  __device__ explicit BackwardProductsBf16(unsigned char* shared) {
    s = reinterpret_cast<__nv_bfloat16*>(shared);
    c_chunk = reinterpret_cast<__nv_bfloat16*>(shared + kSBytes);
    e_chunk = reinterpret_cast<__nv_bfloat16*>(shared + kSBytes + kChunkBytes);
  }
  __device__ void store_s(int row, int col, float value) { s[row * kSPitch + col] = __float2bfloat16(value); }

  // Runs both products over all of D; the caller has written S and synced.
  // c_rows: null, or the row of C (and dC) of each tile column: column p is row c_rows[p].
  template <bool kAligned>
  __device__ void run(const __nv_bfloat16* __restrict__ e, const __nv_bfloat16* __restrict__ c, int64_t n, int64_t v,
                      int64_t d, int64_t row0, int64_t col0, const int* __restrict__ c_rows, float* __restrict__ de_acc,
                      float* __restrict__ dc_acc) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp % 4, wn = warp / 4;  // 32-row × 32-column piece of the 128×64 chunk
    const bool pairs = d % 2 == 0;
    for (int64_t d0 = 0; d0 < d; d0 += kChunk) {
      load_chunk<kAligned>(c, v, col0, c_rows, d, d0, c_chunk);
      load_chunk<kAligned>(e, n, row0, nullptr, d, d0, e_chunk);
      __syncthreads();
      float acc_de[2][4][4] = {}, acc_dc[2][4][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < kBN; k0 += 16) {
        uint32_t a_s[2][4], a_st[2][4], b_c[4][2], b_e[4][2];  // S, Sᵀ, C chunk, E chunk
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
          const int m0 = wm * 32 + mt * 16;
          // S rows m0.. as A (row-major): lanes 0-15 rows at k0, 16-31 at k0+8.
          ldmatrix_x4(a_s[mt], s + (m0 + lane % 16) * kSPitch + k0 + (lane / 16) * 8, false);
          // Sᵀ rows m0.. as A: S stored [k][m], read transposed. Matrix
          // lane/8: k half = (lane/8)/2, m half = (lane/8)%2.
          const int mi = lane / 8;
          ldmatrix_x4(a_st[mt], s + (k0 + lane % 8 + (mi / 2) * 8) * kSPitch + m0 + (mi % 2) * 8, true);
        }
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          // B [k][n] stored row-major in k: ldmatrix.trans gives the column
          // fragments; x4 covers n0..n0+15 (two n8 tiles) × k0..k0+15.
          const int n0 = wn * 32 + np * 16;
          const int k = k0 + lane % 8 + ((lane / 8) % 2) * 8, nn = n0 + (lane / 16) * 8;
          uint32_t r[4];
          ldmatrix_x4(r, c_chunk + k * kChunkPitch + nn, true);
          b_c[2 * np][0] = r[0], b_c[2 * np][1] = r[1], b_c[2 * np + 1][0] = r[2], b_c[2 * np + 1][1] = r[3];
          ldmatrix_x4(r, e_chunk + k * kChunkPitch + nn, true);
          b_e[2 * np][0] = r[0], b_e[2 * np][1] = r[1], b_e[2 * np + 1][0] = r[2], b_e[2 * np + 1][1] = r[3];
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < 4; ++nt) {
            mma_bf16(acc_de[mt][nt], a_s[mt], b_c[nt]);
            mma_bf16(acc_dc[mt][nt], a_st[mt], b_e[nt]);
          }
      }
      // Accumulator (mt, nt, half): row m0 + lane/4 + 8·half, columns n + {0, 1}.
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int m = wm * 32 + mt * 16 + lane / 4 + 8 * half;
            const int64_t col = d0 + wn * 32 + nt * 8 + (lane % 4) * 2;
            if (col >= d) continue;
            const float* de_pair = acc_de[mt][nt] + 2 * half;
            const float* dc_pair = acc_dc[mt][nt] + 2 * half;
            const bool both = col + 1 < d;
            if (row0 + m < n) {
              float* dst = de_acc + (row0 + m) * d + col;
              if (both) atomic_add_pair(dst, de_pair[0], de_pair[1], pairs);
              else atomicAdd(dst, de_pair[0]);
            }
            if (col0 + m < v) {
              const int64_t vocab = c_rows != nullptr ? c_rows[col0 + m] : col0 + m;
              float* dst = dc_acc + vocab * d + col;
              if (both) atomic_add_pair(dst, dc_pair[0], dc_pair[1], pairs);
              else atomicAdd(dst, dc_pair[0]);
            }
          }
      __syncthreads();  // before the next chunk overwrites c_chunk and e_chunk
    }
  }

 private:
  // Rows [first, first+128) (through `rows_of` when given) × columns
  // [d0, d0+64) of a [rows, d] matrix; zeros outside.
  template <bool kAligned>
  __device__ __forceinline__ static void load_chunk(const __nv_bfloat16* src, int64_t rows, int64_t first,
                                                    const int* rows_of, int64_t d, int64_t d0, __nv_bfloat16* dst) {
    for (int i = threadIdx.x; i < kBM * (kChunk / 8); i += kThreads) {
      const int r = i / (kChunk / 8), part = i % (kChunk / 8);
      const int64_t position = first + r, k = d0 + part * 8;
      const bool in_rows = position < rows;
      const int64_t row = in_rows && rows_of != nullptr ? rows_of[position] : position;
      __nv_bfloat16* out = dst + r * kChunkPitch + part * 8;
      if constexpr (kAligned) {
        uint4 value = make_uint4(0, 0, 0, 0);
        if (in_rows && k < d) value = *reinterpret_cast<const uint4*>(src + row * d + k);
        *reinterpret_cast<uint4*>(out) = value;
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) out[j] = (in_rows && k + j < d) ? src[row * d + k + j] : __float2bfloat16(0.0f);
      }
    }
  }
};

struct BackwardProductsFp32 {
  static constexpr int kBM = 64, kBN = 64, kChunk = 64, kThreads = 256, kPitch = 65;
  static constexpr size_t kSharedBytes = static_cast<size_t>(3) * kBM * kPitch * sizeof(float);
  using Scalar = float;

  float* s;   // [kBM tokens][kPitch]
  float* c_chunk;  // [kBN vocab][kPitch]
  float* e_chunk;  // [kBM tokens][kPitch]

  __device__ explicit BackwardProductsFp32(unsigned char* shared) {
    s = reinterpret_cast<float*>(shared);
    c_chunk = s + kBM * kPitch;
    e_chunk = c_chunk + kBN * kPitch;
  }
  __device__ void store_s(int row, int col, float value) { s[row * kPitch + col] = value; }

  template <bool kAligned>
  __device__ void run(const float* __restrict__ e, const float* __restrict__ c, int64_t n, int64_t v, int64_t d,
                      int64_t row0, int64_t col0, const int* __restrict__ c_rows, float* __restrict__ de_acc,
                      float* __restrict__ dc_acc) {
    // Thread (tx, ty) of 16×16 owns rows ty + 16i and columns tx + 16j of both chunk products.
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    for (int64_t d0 = 0; d0 < d; d0 += kChunk) {
      for (int i = threadIdx.x; i < kBM * kChunk; i += kThreads) {
        const int r = i / kChunk, k = i % kChunk;
        const int64_t vocab = col0 + r < v && c_rows != nullptr ? c_rows[col0 + r] : col0 + r;
        c_chunk[r * kPitch + k] = (col0 + r < v && d0 + k < d) ? c[vocab * d + d0 + k] : 0.0f;
        e_chunk[r * kPitch + k] = (row0 + r < n && d0 + k < d) ? e[(row0 + r) * d + d0 + k] : 0.0f;
      }
      __syncthreads();
      float acc_de[4][4] = {}, acc_dc[4][4] = {};
      for (int k = 0; k < kBN; ++k) {  // k: vocab for dE, token for dC
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            acc_de[i][j] = fmaf(s[(ty + 16 * i) * kPitch + k], c_chunk[k * kPitch + tx + 16 * j], acc_de[i][j]);
            acc_dc[i][j] = fmaf(s[k * kPitch + ty + 16 * i], e_chunk[k * kPitch + tx + 16 * j], acc_dc[i][j]);
          }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = d0 + tx + 16 * j;
          if (col >= d) continue;
          if (row0 + ty + 16 * i < n) atomicAdd(de_acc + (row0 + ty + 16 * i) * d + col, acc_de[i][j]);
          const int64_t position = col0 + ty + 16 * i;
          if (position < v)
            atomicAdd(dc_acc + (c_rows != nullptr ? c_rows[position] : position) * d + col, acc_dc[i][j]);
        }
      __syncthreads();
    }
  }
};

template <typename T>
struct BackwardProductsFor;
template <>
struct BackwardProductsFor<__nv_bfloat16> {
  using type = BackwardProductsBf16;
};
template <>
struct BackwardProductsFor<float> {
  using type = BackwardProductsFp32;
};

}  // namespace cce
