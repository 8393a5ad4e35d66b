// The threads that hold one tile's values and must meet at a barrier: the
// whole block for the block-level tile products, one consumer warpgroup for
// the Hopper pipeline (whose producer warp never takes part in an epilogue).
// Epilogues (stage code) use only rank(), size() and sync() of their
// fragment's Team, so the same epilogue runs under every tile product.
#pragma once

#include <cuda_runtime.h>

namespace cce {

struct BlockTeam {
  __device__ __forceinline__ static int rank() { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ static int size() { return static_cast<int>(blockDim.x); }
  __device__ __forceinline__ static void sync() { __syncthreads(); }
};

// Warpgroup w (128 threads, w ≥ 1) of a block; named barrier 1 + w, so that
// barrier 0 (__syncthreads) stays free.
struct WarpgroupTeam {
  __device__ __forceinline__ static int rank() { return static_cast<int>(threadIdx.x % 128); }
  __device__ __forceinline__ static int size() { return 128; }
  __device__ __forceinline__ static void sync() {
    asm volatile("bar.sync %0, 128;\n" ::"r"(1 + static_cast<int>(threadIdx.x / 128)) : "memory");
  }
};

}  // namespace cce
