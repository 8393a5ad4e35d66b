// The C interface's own kernels (cce_capi.cpp):
//   - the targets' check: the stages index C by the targets, so one out of
//     range must never reach them: they run on a copy where it is
//     ignore_index, queued before the host waits for the check, which then
//     refuses the call with one line naming it;
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
#include "common/mapped_value.h"
#include "common/problem.h"
#include "python/capi_kernels.h"

namespace cce {
namespace {

// The smallest position of a target that is neither ignore_index nor in
// [0, V), and the targets copied with every such one replaced by
// ignore_index, so that the stages may run on the copy before the host knows.
__global__ void sanitize_targets(const int64_t* __restrict__ targets, int64_t n, int64_t v, int64_t ignore_index,
                                 int64_t* __restrict__ safe, unsigned long long* first) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t t = targets[i];
    const bool bad = t != ignore_index && (t < 0 || t >= v);
    if (bad) atomicMin(first, static_cast<unsigned long long>(i));
    safe[i] = bad ? ignore_index : t;
  }
}

int blocks_for(int64_t count, int threads, int per_sm) {
  int device = 0, sms = 0;
  CCE_CUDA_CHECK(cudaGetDevice(&device));
  CCE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<int>(std::min<int64_t>((count + threads - 1) / threads, int64_t{per_sm} * sms));
}

// Both gradients in one launch (one kernel launch less on the backward's host path): the
// positions [0, a_count) are a's, the rest b's.
template <typename T>
__global__ void scale_kernel(T* __restrict__ a, int64_t a_count, T* __restrict__ b, int64_t b_count,
                             const float* __restrict__ g) {
  const float s = *g;
  if (s == 1.0f) return;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a_count + b_count; i += stride) {
    T& x = i < a_count ? a[i] : b[i - a_count];
    if constexpr (sizeof(T) == 2)
      x = __float2bfloat16_rn(__bfloat162float(x) * s);  // fp32 product, rounded once
    else
      x = x * s;
  }
}

}  // namespace

TargetCheckSlots::~TargetCheckSlots() {
  if (done != nullptr) cudaEventDestroy(done);  // no throwing from a destructor
}

TargetCheck start_target_check(const int64_t* targets, int64_t n, int64_t v, int64_t ignore_index, int64_t* safe,
                               TargetCheckSlots& slots, cudaStream_t stream) {
  // The first bad position, which the host reads once the check's event has passed.
  unsigned long long* first = slots.first.get();
  if (slots.done == nullptr) CCE_CUDA_CHECK(cudaEventCreateWithFlags(&slots.done, cudaEventDisableTiming));
  TargetCheck check{targets, n, v, ignore_index, first, slots.done};
  if (n <= 0) return check;
  *first = ULLONG_MAX;
  constexpr int kThreads = 256;
  sanitize_targets<<<static_cast<unsigned>(blocks_for(n, kThreads, 4)), kThreads, 0, stream>>>(targets, n, v,
                                                                                               ignore_index, safe, first);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaEventRecord(slots.done, stream));
  return check;
}

void finish_target_check(const TargetCheck& check) {
  if (check.n <= 0) return;
  CCE_CUDA_CHECK(cudaEventSynchronize(check.done));
  if (*check.first == ULLONG_MAX) return;
  int64_t bad = 0;
  CCE_CUDA_CHECK(cudaMemcpy(&bad, check.targets + *check.first, sizeof bad, cudaMemcpyDeviceToHost));
  throw InputError("target " + std::to_string(bad) + " at position " + std::to_string(*check.first) +
                   " is outside [0, " + std::to_string(check.v) + ") and is not ignore_index (" +
                   std::to_string(check.ignore_index) + ")");
}

void scale_in_place(void* a, int64_t a_count, void* b, int64_t b_count, Dtype dtype, const float* g,
                    cudaStream_t stream) {
  if (b == nullptr) b_count = 0;
  const int64_t count = a_count + b_count;
  if (count <= 0) return;
  constexpr int kThreads = 256;
  // A few blocks per SM stream the memory; more only add blocks that read g and return.
  const auto blocks = static_cast<unsigned>(blocks_for(count, kThreads, 8));
  if (dtype == Dtype::kBFloat16)
    scale_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(a), a_count,
                                                 static_cast<__nv_bfloat16*>(b), b_count, g);
  else
    scale_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(a), a_count, static_cast<float*>(b), b_count, g);
  CCE_CHECK_LAUNCH();
}

}  // namespace cce
