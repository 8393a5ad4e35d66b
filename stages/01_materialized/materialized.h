// Stage 01: materialized cross-entropy.
//
// Forward:  logits = E·Cᵀ with cuBLAS into an fp32 [N,V] buffer, then one
//           block per row computes max, Σexp, LSE, the target logit and the loss.
// Backward: dlogit = g_i·(softmax − onehot)·softcap' written over that buffer,
//           then dE = dlogit·C and dC = dlogitᵀ·E with cuBLAS.
//
// The cuBLAS calls are building blocks stage 02 reuses.
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

// Stage 02 derives from this class and replaces only row_losses(): the
// logits buffer, the backward and the memory stay the same.
class MaterializedStage : public Stage {
 public:
  std::string name() const override { return "01_materialized"; }
  std::string summary() const override { return "cuBLAS logits [N,V] in fp32, softmax CE, backward through the logits"; }
  bool has_backward() const override { return true; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  void release_workspace() override;

 protected:
  // LSE_i and loss_i (0 for ignored tokens) from the fp32 logits [N,V].
  // Stage 01: three passes over each row (max, Σexp, target).
  virtual void row_losses(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                          cudaStream_t stream);

 private:
  DeviceBuffer<float> logits_;          // [N,V]; kept from forward to backward
  DeviceBuffer<float> loss_per_token_;  // [N], mean and sum only
  DeviceBuffer<float> grad_scale_;      // [N], backward
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s01
