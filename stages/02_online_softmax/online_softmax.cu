#include "stages/02_online_softmax/online_softmax.h"

#include "common/check.h"
#include "common/device_math.cuh"
#include "stages/01_materialized/materialized.h"
#include "stages/02_online_softmax/online_softmax.cuh"

namespace cce::s02 {
namespace {

constexpr int kRowThreads = 512;

// One block per row, one pass: each thread folds the logits j ≡ threadIdx.x
// (mod blockDim.x) into its own state, picking up the target logit on the
// way; the block then merges the states. 4 independent loads per iteration
// keep enough bytes in flight for a 256000-wide row.
__global__ void online_cross_entropy_kernel(const float* __restrict__ logits, const int64_t* __restrict__ targets,
                                            int64_t v, int64_t ignore_index, float softcap, float* __restrict__ lse,
                                            float* __restrict__ loss_per_token) {
  __shared__ float scratch[64];
  __shared__ float target_logit;
  const int64_t row = blockIdx.x;
  const int64_t t = targets[row];
  const float* z_row = logits + row * v;
  OnlineSoftmax state;
  constexpr int kUnroll = 4;
  const int64_t step = static_cast<int64_t>(blockDim.x) * kUnroll;
  int64_t base = 0;
  for (; base + step <= v; base += step) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = z_row[base + u * blockDim.x + threadIdx.x];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t j = base + u * blockDim.x + threadIdx.x;
      const float z = apply_softcap(x[u], softcap);
      if (j == t) target_logit = z;
      state.add(z);
    }
  }
  for (int64_t j = base + threadIdx.x; j < v; j += blockDim.x) {
    const float z = apply_softcap(z_row[j], softcap);
    if (j == t) target_logit = z;
    state.add(z);
  }
  state = block_merge(state, scratch);  // its barriers also publish target_logit
  if (threadIdx.x == 0) {
    const float row_lse = state.lse();
    lse[row] = row_lse;
    loss_per_token[row] = t == ignore_index ? 0.0f : row_lse - target_logit;
  }
}

}  // namespace

void online_cross_entropy_rows(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                               cudaStream_t stream) {
  s01::launch_row_kernel(online_cross_entropy_kernel, kRowThreads, in, logits, lse, loss_per_token, stream);
}

std::unique_ptr<Stage> make_stage() {
  return s01::make_materialized_stage("02_online_softmax", "one-pass online softmax over the logits, saved LSE",
                                      online_cross_entropy_rows);
}

}  // namespace cce::s02
