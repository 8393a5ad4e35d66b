#include "stages/02_online_softmax/online_softmax.h"

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/token_reduction.h"
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

std::vector<MemoryItem> OnlineSoftmaxStage::workspace(const Problem& p, bool backward) const {
  std::vector<MemoryItem> items = {{"logits fp32 [N,V]", static_cast<size_t>(p.n) * p.v * 4}};
  if (p.reduction != Reduction::kNone) items.push_back({"per-token loss", static_cast<size_t>(p.n) * 4});
  if (backward) items.push_back({"per-token grad scale", static_cast<size_t>(p.n) * 4});
  return items;
}

void OnlineSoftmaxStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (logits_.size() != static_cast<size_t>(p.n * p.v)) logits_ = DeviceBuffer<float>(p.n * p.v);
  const bool reduce = p.reduction != Reduction::kNone;
  if (reduce && loss_per_token_.size() != static_cast<size_t>(p.n)) loss_per_token_ = DeviceBuffer<float>(p.n);
  s01::gemm_logits(in, logits_.get(), stream);
  float* per_token = reduce ? loss_per_token_.get() : loss;
  online_cross_entropy_kernel<<<static_cast<unsigned>(p.n), kRowThreads, 0, stream>>>(
      logits_.get(), in.targets.get(), p.v, p.ignore_index, p.softcap, lse, per_token);
  CCE_CHECK_LAUNCH();
  if (reduce) reduce_token_losses(p, per_token, in.targets.get(), loss, stream);
}

void OnlineSoftmaxStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                                  cudaStream_t stream) {
  const Problem& p = in.problem;
  if (logits_.size() != static_cast<size_t>(p.n * p.v)) throw InputError("stage 02: backward() before forward()");
  if (grad_scale_.size() != static_cast<size_t>(p.n)) grad_scale_ = DeviceBuffer<float>(p.n);
  compute_token_grad_scale(p, in.targets.get(), upstream, grad_scale_.get(), stream);
  const int64_t pitch = s01::logits_to_dlogits_in_place(in, logits_.get(), lse, grad_scale_.get(), stream);
  s01::gemm_gradients(in, logits_.get(), pitch, de, dc, stream);
}

void OnlineSoftmaxStage::release_workspace() {
  logits_.reset();
  loss_per_token_.reset();
  grad_scale_.reset();
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<OnlineSoftmaxStage>(); }

}  // namespace cce::s02
