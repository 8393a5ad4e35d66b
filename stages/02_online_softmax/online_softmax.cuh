// The online-softmax state: a running maximum m and a running sum
// s = Σ exp(x − m) over the values seen so far. Adding a value larger than m
// rescales s by exp(m_old − m_new); two states over disjoint sets merge the
// same way, in any order. LSE = m + log s.
//
// Stage 02 folds a row of logits into one state per thread and merges them
// across the block; stages 03 and 05 fold logits tiles into per-row states.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace cce {

struct OnlineSoftmax {
  float max = -INFINITY;
  float sum = 0.0f;

  __device__ __forceinline__ void add(float x) {
    // EXERCISE(the online add): fold x into (max, sum); rescale sum when the max grows
    if (x > max) {
      sum = sum * __expf(max - x) + 1.0f;  // exp(−inf) = 0 for the first value
      max = x;
    } else {
      sum += __expf(x - max);
    }
    // END EXERCISE
  }

  __device__ __forceinline__ void merge(const OnlineSoftmax& other) {
    // EXERCISE(the merge rule): rescale both sums to the larger max; empty + empty stays empty
    const float m = fmaxf(max, other.max);
    if (m == -INFINITY) return;  // both empty
    sum = sum * __expf(max - m) + other.sum * __expf(other.max - m);
    max = m;
    // END EXERCISE
  }

  __device__ __forceinline__ float lse() const { return max + logf(sum); }
};

__device__ __forceinline__ OnlineSoftmax warp_merge(OnlineSoftmax s) {
  for (int offset = 16; offset > 0; offset /= 2) {
    OnlineSoftmax other;
    other.max = __shfl_xor_sync(0xffffffffu, s.max, offset);
    other.sum = __shfl_xor_sync(0xffffffffu, s.sum, offset);
    s.merge(other);
  }
  return s;
}

// Merges the states of all threads of a block (blockDim.x a multiple of 32).
// `scratch` holds 64 floats of shared memory. Every thread gets the result.
__device__ __forceinline__ OnlineSoftmax block_merge(OnlineSoftmax s, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  s = warp_merge(s);
  if (lane == 0) {
    scratch[warp] = s.max;
    scratch[32 + warp] = s.sum;
  }
  __syncthreads();
  OnlineSoftmax w;
  if (lane < warps) {
    w.max = scratch[lane];
    w.sum = scratch[32 + lane];
  }
  w = warp_merge(w);
  __syncthreads();
  return w;
}

}  // namespace cce
