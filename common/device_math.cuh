// Small device-side building blocks shared by the stages: element loads as
// float, a lower bound in a sorted array, 2^x, the softcap and its derivative,
// the softmax's gradient of one logit, a bool as a type, and warp/block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <type_traits>

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

// 2^x on the special-function unit (what __expf uses underneath): e^x = 2^(x·log2e).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2e = 1.4426950408889634f;
// 1/x on the special-function unit, within 1 ulp; 0 for |x| ≥ 2^126. __frcp_rn
// rounds exactly, but checks each value's exponent and branches to a slow path.
__device__ __forceinline__ float fast_reciprocal(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// f(std::true_type{}) or f(std::false_type{}): a setting known per launch or
// per tile becomes a template argument, so that the loops inside carry no test of it.
#pragma nv_exec_check_disable  // f is a host lambda on the host, a device one in kernels
template <class F>
__host__ __device__ __forceinline__ void static_bool(bool value, F&& f) {
  if (value) f(std::true_type{});
  else f(std::false_type{});
}

// z = s·tanh(l/s) when a softcap s > 0 is set, else z = l, through
// tanh(x) = 1 − 2/(e^(2x) + 1): one 2^x, one reciprocal, no branch (tanhf
// branches per value and calls a slow path, in epilogues the tensor cores wait
// for). Within 12·s fp32 units of s·tanh(l/s), whatever l (docs/tolerances.md,
// "A logit"); ±s at the ends.
__device__ __forceinline__ float apply_softcap(float logit, float softcap) {
  if (softcap <= 0.0f) return logit;
  const float e2x = fast_exp2(logit * (2.0f * kLog2e / softcap));
  return softcap - (2.0f * softcap) * fast_reciprocal(e2x + 1.0f);
}
// dz/dl expressed through z: 1 − (z/s)², or 1 without softcap.
__device__ __forceinline__ float softcap_derivative(float z, float softcap) {
  if (softcap <= 0.0f) return 1.0f;
  float r = z / softcap;
  return 1.0f - r * r;
}

// S_ij = g_i·(p_ij − [j = t_i])·softcap'(z_ij) of one logit z, p = 2^((z − LSE_i)·log2e) from z − LSE_i: the
// difference first, exact for nearby values. softcap' (kSoftcap) from 1/s: a multiply, where a division would do.
template <bool kSoftcap>
__device__ __forceinline__ float softmax_gradient(float z_minus_lse, float z, bool is_target, float g,
                                                  float inv_softcap) {
  float s = g * fast_exp2(z_minus_lse * kLog2e);
  if (is_target) s -= g;
  if constexpr (kSoftcap) {
    const float r = z * inv_softcap;
    s *= 1.0f - r * r;
  }
  return s;
}

template <typename T>  // float, and the per-token reductions' double and long long
__device__ __forceinline__ T warp_reduce_sum(T x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}
__device__ __forceinline__ float warp_reduce_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

template <bool kIsMax, typename T>
__device__ __forceinline__ T warp_reduce(T x) {
  if constexpr (kIsMax)
    return warp_reduce_max(x);
  else
    return warp_reduce_sum(x);
}

// Block-wide reductions for blockDim.x a multiple of 32 (at most 1024), in a
// fixed order (the same bits every run). Every thread gets the result.
// `scratch` holds 32 values of shared memory; the trailing barrier lets the
// caller reuse it at once. The max is for floats; the sum for any T.
template <bool kIsMax, typename T>
__device__ __forceinline__ T block_reduce(T x, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_reduce<kIsMax>(x);
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  T identity{};
  if constexpr (kIsMax) identity = -INFINITY;
  x = lane < warps ? scratch[lane] : identity;
  x = warp_reduce<kIsMax>(x);
  __syncthreads();
  return x;
}
template <typename T>
__device__ __forceinline__ T block_reduce_sum(T x, T* scratch) { return block_reduce<false>(x, scratch); }
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
