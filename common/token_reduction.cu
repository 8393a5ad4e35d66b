#include "common/check.h"
#include "common/token_reduction.h"

namespace cce {
namespace {

constexpr int kThreads = 1024;

// One block: N is at most a few ten thousand tokens, a single pass is enough.
// Sums in double so that the reduced loss does not depend on N's size.
__global__ void reduce_token_losses_kernel(const float* __restrict__ loss_per_token,
                                           const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index,
                                           bool mean, float* __restrict__ loss) {
  __shared__ double partial_sum[kThreads];
  __shared__ int64_t partial_count[kThreads];
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    if (targets[i] != ignore_index) {
      sum += loss_per_token[i];
      ++count;
    }
  }
  partial_sum[threadIdx.x] = sum;
  partial_count[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      partial_sum[threadIdx.x] += partial_sum[threadIdx.x + stride];
      partial_count[threadIdx.x] += partial_count[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    double total = partial_sum[0];
    if (mean) total = partial_count[0] > 0 ? total / static_cast<double>(partial_count[0]) : 0.0;
    *loss = static_cast<float>(total);
  }
}

__global__ void token_grad_scale_kernel(const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index,
                                        int reduction, const float* __restrict__ upstream,
                                        float* __restrict__ grad_scale) {
  __shared__ int64_t partial_count[kThreads];
  int64_t count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) count += targets[i] != ignore_index;
  partial_count[threadIdx.x] = count;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial_count[threadIdx.x] += partial_count[threadIdx.x + stride];
    __syncthreads();
  }
  const int64_t n_valid = partial_count[0];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float g;
    if (targets[i] == ignore_index)
      g = 0.0f;
    else if (reduction == static_cast<int>(Reduction::kMean))
      g = upstream[0] / static_cast<float>(n_valid);  // n_valid >= 1 here
    else if (reduction == static_cast<int>(Reduction::kSum))
      g = upstream[0];
    else
      g = upstream[i];
    grad_scale[i] = g;
  }
}

}  // namespace

void reduce_token_losses(const Problem& p, const float* loss_per_token, const int64_t* targets, float* loss,
                         cudaStream_t stream) {
  reduce_token_losses_kernel<<<1, kThreads, 0, stream>>>(loss_per_token, targets, p.n, p.ignore_index,
                                                         p.reduction == Reduction::kMean, loss);
  CCE_CHECK_LAUNCH();
}

std::vector<MemoryItem> per_token_loss_scratch(const Problem& p) {
  if (p.reduction == Reduction::kNone) return {};
  return {{"per-token loss", static_cast<size_t>(p.n) * sizeof(float)}};
}

float* per_token_loss_buffer(const Problem& p, float* loss, const Scratch& scratch) {
  return p.reduction == Reduction::kNone ? loss : scratch.get<float>("per-token loss");
}

void finish_loss(const Problem& p, const float* loss_per_token, const int64_t* targets, float* loss,
                 cudaStream_t stream) {
  if (p.reduction != Reduction::kNone) reduce_token_losses(p, loss_per_token, targets, loss, stream);
}

void compute_token_grad_scale(const Problem& p, const int64_t* targets, const float* upstream, float* grad_scale,
                              cudaStream_t stream) {
  token_grad_scale_kernel<<<1, kThreads, 0, stream>>>(targets, p.n, p.ignore_index, static_cast<int>(p.reduction),
                                                      upstream, grad_scale);
  CCE_CHECK_LAUNCH();
}

}  // namespace cce
