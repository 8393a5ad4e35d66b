#include "common/check.h"
#include "common/dependent_launch.cuh"
#include "common/device_math.cuh"
#include "common/token_reduction.h"

namespace cce {
namespace {

constexpr int kThreads = 1024;

// One block: N is at most a few ten thousand tokens, a single pass is enough.
// Sums in double so that the reduced loss does not depend on N's size, in
// block_reduce_sum's fixed order (the same bits every run). Every
// token's loss is loaded (an ignored token's is 0) so that no load waits on
// its target.
__global__ void __launch_bounds__(kThreads)
    reduce_token_losses_kernel(const float* __restrict__ loss_per_token, const int64_t* __restrict__ targets,
                               int64_t n, int64_t ignore_index, bool mean, float* __restrict__ loss) {
  wait_for_kernel_ahead();
  double sum = 0.0;
  long long count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const bool valid = targets[i] != ignore_index;
    const float token_loss = loss_per_token[i];
    sum += valid ? token_loss : 0.0f;
    count += valid;
  }
  __shared__ double sums[32];
  __shared__ long long counts[32];
  sum = block_reduce_sum(sum, sums);
  count = block_reduce_sum(count, counts);
  if (threadIdx.x == 0) {
    if (mean) sum = count > 0 ? sum / static_cast<double>(count) : 0.0;
    *loss = static_cast<float>(sum);
  }
}

__global__ void __launch_bounds__(kThreads)
    token_grad_scale_kernel(const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index, int reduction,
                            const float* __restrict__ upstream, float* __restrict__ grad_scale) {
  wait_for_kernel_ahead();
  long long count = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) count += targets[i] != ignore_index;
  __shared__ long long counts[32];
  const long long n_valid = block_reduce_sum(count, counts);
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
  launch_dependent(reduce_token_losses_kernel, 1, kThreads, stream, loss_per_token, targets, p.n, p.ignore_index,
                   p.reduction == Reduction::kMean, loss);
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
  launch_dependent(token_grad_scale_kernel, 1, kThreads, stream, targets, p.n, p.ignore_index,
                   static_cast<int>(p.reduction), upstream, grad_scale);
}

}  // namespace cce
