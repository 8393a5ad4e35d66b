// Stage 02: online-softmax cross-entropy over cuBLAS logits.
//
// The logits still come from cuBLAS into an fp32 [N,V] buffer (stage 01's
// gemm_logits), but each row is read once: every thread folds its share of the
// row into an OnlineSoftmax state (running max, rescaled running sum), the
// block merges the states, and the LSE is saved. The backward is stage 01's:
// it reads the saved LSE and rewrites the logits buffer as dlogit in one pass,
// then cuBLAS forms dE and dC. No other [N,V] buffer exists.
#pragma once

#include <memory>

#include "common/stage.h"

namespace cce::s02 {

class OnlineSoftmaxStage : public Stage {
 public:
  std::string name() const override { return "02_online_softmax"; }
  std::string summary() const override { return "one-pass online softmax over the logits, saved LSE"; }
  bool has_backward() const override { return true; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  void release_workspace() override;

 private:
  DeviceBuffer<float> logits_;          // [N,V]
  DeviceBuffer<float> loss_per_token_;  // [N], mean and sum only
  DeviceBuffer<float> grad_scale_;      // [N], backward
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s02
