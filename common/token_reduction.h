// The two per-token bookkeeping steps every stage shares, on the device:
//   forward:  loss = Σ_i loss_i (sum) or Σ_i loss_i / #valid (mean; 0 when no
//             token is valid), from per-token losses that are 0 for ignored tokens;
//   backward: g_i, the upstream gradient of token i's loss: upstream/#valid
//             (mean), upstream (sum), upstream_i (none), 0 for ignored tokens.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/problem.h"
#include "common/scratch.h"

namespace cce {

// loss_per_token: [N] device; loss: [1] device. Only for mean and sum.
void reduce_token_losses(const Problem& problem, const float* loss_per_token, const int64_t* targets, float* loss,
                         cudaStream_t stream);

// Every fused stage ends its forward the same way: per-token losses, then
// (mean, sum) their reduction. With reduction none the per-token losses are
// the output itself; otherwise they need the scratch item below.
std::vector<MemoryItem> per_token_loss_scratch(const Problem& problem);
// Where the per-token losses go: `loss` itself (none) or the scratch item.
float* per_token_loss_buffer(const Problem& problem, float* loss, const Scratch& scratch);
// Reduces the per-token losses into loss[0] (mean, sum); nothing for none.
void finish_loss(const Problem& problem, const float* loss_per_token, const int64_t* targets, float* loss,
                 cudaStream_t stream);

// upstream: [1] or [N] (none) device; grad_scale: [N] device output.
void compute_token_grad_scale(const Problem& problem, const int64_t* targets, const float* upstream,
                              float* grad_scale, cudaStream_t stream);

}  // namespace cce
