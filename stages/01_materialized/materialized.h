// Stage 01: materialized cross-entropy.
//
// Forward:  logits = E·Cᵀ with cuBLAS into an fp32 [N,V] buffer, then one
//           block per row computes max, Σexp, LSE, the target logit and the loss.
// Backward: dlogit = g_i·(softmax − onehot)·softcap' written over that buffer,
//           then dE = dlogit·C and dC = dlogitᵀ·E with cuBLAS.
//
// Uses: common/ (cuBLAS handle, token reduction). The cuBLAS calls, the
// scratch and the backward are building blocks stage 02 reuses.
#pragma once

#include <memory>

#include "common/stage.h"

namespace cce::s01 {

// logits [N,V] fp32 = E [N,D] · C [V,D]ᵀ, fp32 accumulation (no TF32 for fp32).
void gemm_logits(const DeviceInputs& in, float* logits, cudaStream_t stream);

// dE = dlogit·C and dC = dlogitᵀ·E. dlogit is [N,V] in the problem's dtype
// with a row pitch of `dlogit_pitch` elements (stage 01 packs bf16 rows into
// the front of the fp32 logits rows, so the pitch is 2V there).
void gemm_gradients(const DeviceInputs& in, const void* dlogit, int64_t dlogit_pitch, void* de, void* dc,
                    cudaStream_t stream);

// Rewrites fp32 logits [N,V] in place as the problem's dtype:
//   dlogit_ij = g_i · (exp(z_ij − LSE_i) − [j = t_i]) · softcap'(z_ij).
// fp32 keeps the layout; bf16 row i is packed into the first half of its own
// fp32 row, so the result has a pitch of 2V bf16 elements. Returns that pitch.
int64_t logits_to_dlogits_in_place(const DeviceInputs& in, float* logits, const float* lse, const float* grad_scale,
                                   cudaStream_t stream);

// The scratch of this stage and of stage 02: the fp32 logits [N,V] (kept
// from forward to backward), the per-token losses (mean, sum) and, with a
// backward, the per-token grad scale.
std::vector<MemoryItem> materialized_scratch(const Problem& problem, bool backward);

// A kernel of one block per row of the fp32 logits that writes LSE_i and
// loss_i (0 for ignored tokens): (logits, targets, V, ignore_index, softcap,
// lse, loss_per_token). Stage 01's reads each row three times, stage 02's once.
using RowKernel = void (*)(const float*, const int64_t*, int64_t, int64_t, float, float*, float*);
void launch_row_kernel(RowKernel kernel, int threads, const DeviceInputs& in, const float* logits, float* lse,
                       float* loss_per_token, cudaStream_t stream);

// LSE_i and loss_i (0 for ignored tokens) from the fp32 logits [N,V]: three
// passes over each row (max, Σexp, target). Stage 02 does it in one.
void cross_entropy_rows(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                        cudaStream_t stream);

// The forward of stages 01 and 02: the logits with cuBLAS into the scratch,
// then `rows` (this stage's cross_entropy_rows, or stage 02's one-pass
// kernel), then the reduction of the per-token losses.
using RowLosses = void (*)(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                           cudaStream_t stream);
void forward_through_logits(const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, RowLosses rows,
                            cudaStream_t stream);

// The backward of stages 01 and 02: dlogit over the logits buffer, then the
// two cuBLAS products. The scratch holds the forward's logits.
void backward_through_logits(const DeviceInputs& in, Scratch& scratch, const float* lse, const float* upstream,
                             void* de, void* dc, cudaStream_t stream);

// A stage that materializes the logits and computes its row losses with `rows`:
// stage 01 with cross_entropy_rows, stage 02 with its one-pass kernel.
std::unique_ptr<Stage> make_materialized_stage(const std::string& name, const std::string& summary,
                                               RowLosses rows);

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s01
