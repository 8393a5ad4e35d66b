// Small device-side building blocks shared by the stages: element loads as
// float, a lower bound in a sorted array, the softcap and its derivative,
// and warp/block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>

#include "common/check.h"
#include "common/problem.h"

namespace cce {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }

// The first index in [lo, hi) of an ascending array whose value is >= value (hi if none).
__device__ __forceinline__ int lower_bound_index(const int* __restrict__ sorted, int lo, int hi, int64_t value) {
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (sorted[mid] < value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// z = s·tanh(l/s) when a softcap s > 0 is set, else z = l.
__device__ __forceinline__ float apply_softcap(float logit, float softcap) {
  return softcap > 0.0f ? softcap * tanhf(logit / softcap) : logit;
}
// dz/dl expressed through z: 1 − (z/s)², or 1 without softcap.
__device__ __forceinline__ float softcap_derivative(float z, float softcap) {
  if (softcap <= 0.0f) return 1.0f;
  float r = z / softcap;
  return 1.0f - r * r;
}

__device__ __forceinline__ float warp_reduce_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_reduce_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Block-wide reductions for blockDim.x a multiple of 32 (at most 1024). Every
// thread gets the result. `scratch` holds 32 floats of shared memory; the
// trailing barrier lets the caller reuse it at once.
template <bool kIsMax>
__device__ __forceinline__ float block_reduce(float x, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = kIsMax ? warp_reduce_max(x) : warp_reduce_sum(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  x = lane < warps ? scratch[lane] : (kIsMax ? -INFINITY : 0.0f);
  x = kIsMax ? warp_reduce_max(x) : warp_reduce_sum(x);
  __syncthreads();
  return x;
}
__device__ __forceinline__ float block_reduce_sum(float x, float* scratch) { return block_reduce<false>(x, scratch); }
__device__ __forceinline__ float block_reduce_max(float x, float* scratch) { return block_reduce<true>(x, scratch); }

// Calls f(float{}) or f(__nv_bfloat16{}) for the problem's dtype, so that a
// host launcher is written once for both element types.
template <typename F>
void dispatch_dtype(Dtype dtype, F&& f) {
  if (dtype == Dtype::kFloat32)
    f(float{});
  else
    f(__nv_bfloat16{});
}

}  // namespace cce
