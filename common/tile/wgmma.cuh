// Hopper's warpgroup matrix instructions (sm_90a), shared by the block-level
// wgmma tile product (tile_wgmma.cuh) and the warp-specialized pipeline
// (wgmma_pipeline.cuh).
//
// wgmma.mma_async: a warpgroup (4 warps, 128 threads) multiplies a 64×16
// slice of A by an N×16 slice of B, both read straight from shared memory,
// into a 64×N fp32 accumulator spread over the warpgroup's registers (N/2
// per thread; warp w holds rows 16w..16w+15, in the m16n8 picture of
// mma_sync.cuh repeated N/8 times). It is asynchronous: instructions are
// grouped (commit_group) and a later wait_group(k) waits until at most k
// groups are still running.
//
// The forward's operands are K-major (D contiguous) with rows of 64 bf16 = 128 bytes in
// the 128-byte swizzle: the 16-byte chunk c of row r sits at chunk c ^ (r % 8)
// (the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B, and the one the
// block-level product writes by hand), tiles starting on 1024-byte
// boundaries. A 64-bit descriptor tells wgmma that layout: start address >> 4,
// leading byte offset (unused with this swizzle, 1 by convention), 1024 bytes
// between groups of 8 rows, swizzle mode 1 (128 bytes) in bits 62-63.
// Stepping 16 columns of D is +32 bytes, i.e. +2 on the descriptor. The
// backward's products (stage 09) also read MN-major operands
// (wgmma_descriptor_mn), with the transpose immediates.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace cce {

__device__ __forceinline__ uint64_t wgmma_descriptor(uint32_t shared_address) {
  return static_cast<uint64_t>((shared_address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// An MN-major operand (M or N contiguous: rows of C or E [k][d] read as the
// B of a product over k, or S [token][vocab] read as Sᵀ): each 64-wide piece
// of M or N is [k rows][128 bytes] in the same 128-byte swizzle, `piece_bytes`
// apart (the leading byte offset); groups of 8 k-rows are 1024 bytes apart
// (the stride byte offset). Stepping 16 rows of k is +2048 bytes, +128 on the
// descriptor. Such operands take the transpose immediate (tnspA / tnspB = 1).
__device__ __forceinline__ uint64_t wgmma_descriptor_mn(uint32_t shared_address, uint32_t piece_bytes) {
  return static_cast<uint64_t>((shared_address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(piece_bytes >> 4) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Before the first wgmma, and whenever other instructions wrote the accumulators.
__device__ __forceinline__ void wgmma_arrive() {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// Tells the compiler that every accumulator may change here (after a
// wgmma wait, before the next wgmma): no read of d moves across this point.
template <int kCount>
__device__ __forceinline__ void wgmma_fence_operands(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The accumulator operands of the two wgmma shapes: registers %0..%63 (and
// %64..%127), bound to d[0..63] (and d[64..127]).
#define CCE_WGMMA_REGS_0_63 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define CCE_WGMMA_REGS_64_127 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define CCE_WGMMA_D8(i)                                                                                     \
  "+f"(d[(i)]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), \
      "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define CCE_WGMMA_D64(i)                                                                                  \
  CCE_WGMMA_D8((i)), CCE_WGMMA_D8((i) + 8), CCE_WGMMA_D8((i) + 16), CCE_WGMMA_D8((i) + 24),               \
      CCE_WGMMA_D8((i) + 32), CCE_WGMMA_D8((i) + 40), CCE_WGMMA_D8((i) + 48), CCE_WGMMA_D8((i) + 56)

// d (+)= A·Bᵀ for one 64×N×16 step (N = 128: 64 accumulators per thread;
// N = 256: 128); scale_d = 0 overwrites d instead of adding to it.
// kTransposeA, kTransposeB: the operand is MN-major (wgmma_descriptor_mn).
template <int kTransposeA = 0, int kTransposeB = 0>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" CCE_WGMMA_REGS_0_63 "}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : CCE_WGMMA_D64(0)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(kTransposeA), "n"(kTransposeB));
#else
  (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
#endif
}

__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
#if defined(CCE_HAVE_WGMMA) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" CCE_WGMMA_REGS_0_63 "," CCE_WGMMA_REGS_64_127
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : CCE_WGMMA_D64(0), CCE_WGMMA_D64(64)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
#else
  (void)d, (void)desc_a, (void)desc_b, (void)scale_d;
#endif
}

#undef CCE_WGMMA_D64
#undef CCE_WGMMA_D8

}  // namespace cce
