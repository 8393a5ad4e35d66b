// The C interface's own kernels (cce_capi.cpp):
//   - the targets' check: the stages index C by the targets, so one out of
//     range must be refused before they run, with one line naming it;
//   - the op's backward for reduction mean and sum: dE and dC, computed in
//     the forward for an upstream gradient of 1, scaled in place by
//     autograd's upstream gradient g. g is on the device and is almost
//     always 1 (loss.backward()), so every block reads it and returns at once
//     when it is: no pass over dC's V·D values and no host synchronization.
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "common/check.h"
#include "common/problem.h"

namespace cce {
namespace {

// The smallest position of a target that is neither ignore_index nor in [0, V).
__global__ void first_bad_target(const int64_t* __restrict__ targets, int64_t n, int64_t v, int64_t ignore_index,
                                 unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t t = targets[i];
    if (t != ignore_index && (t < 0 || t >= v)) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

int blocks_for(int64_t count, int threads, int per_sm) {
  int device = 0, sms = 0;
  CCE_CUDA_CHECK(cudaGetDevice(&device));
  CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<int>(std::min<int64_t>((count + threads - 1) / threads, int64_t{per_sm} * sms));
}

template <typename T>
__global__ void scale_kernel(T* __restrict__ x, int64_t count, const float* __restrict__ g) {
  const float s = *g;
  if (s == 1.0f) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    if constexpr (sizeof(T) == 2)
      x[i] = __float2bfloat16_rn(__bfloat162float(x[i]) * s);  // fp32 product, rounded once
    else
      x[i] = x[i] * s;
  }
}

}  // namespace

void check_targets(const int64_t* targets, int64_t n, int64_t v, int64_t ignore_index, cudaStream_t stream) {
  if (n <= 0) return;
  // Pinned, mapped host memory (8 bytes for the process): the kernel writes
  // it, the host reads it after the stream's synchronization, no copy.
  static unsigned long long* first = [] {
    void* p = nullptr;
    CCE_CUDA_CHECK(cudaHostAlloc(&p, sizeof(unsigned long long), cudaHostAllocMapped | cudaHostAllocPortable));
    return static_cast<unsigned long long*>(p);
  }();
  *first = ULLONG_MAX;
  constexpr int kThreads = 256;
  first_bad_target<<<static_cast<unsigned>(blocks_for(n, kThreads, 4)), kThreads, 0, stream>>>(targets, n, v,
                                                                                                 ignore_index, first);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (*first == ULLONG_MAX) return;
  int64_t bad = 0;
  CCE_CUDA_CHECK(cudaMemcpy(&bad, targets + *first, sizeof bad, cudaMemcpyDeviceToHost));
  throw InputError("target " + std::to_string(bad) + " at position " + std::to_string(*first) + " is outside [0, " +
                   std::to_string(v) + ") and is not ignore_index (" + std::to_string(ignore_index) + ")");
}

void scale_in_place(void* x, int64_t count, Dtype dtype, const float* g, cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int kThreads = 256;
  // A few blocks per SM stream the memory; more only add blocks that read g and return.
  const int blocks = blocks_for(count, kThreads, 8);
  if (dtype == Dtype::kBFloat16)
    scale_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(x), count, g);
  else
    scale_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<float*>(x), count, g);
  CCE_CHECK_LAUNCH();
}

}  // namespace cce
