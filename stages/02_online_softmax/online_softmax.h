// Stage 02: online-softmax cross-entropy over cuBLAS logits.
//
// The logits still come from cuBLAS into an fp32 [N,V] buffer (stage 01's
// gemm_logits), but each row is read once: every thread folds its share of the
// row into an OnlineSoftmax state (running max, rescaled running sum), the
// block merges the states, and the LSE is saved. Everything else — the
// logits buffer, the backward that rewrites it as dlogit in one pass reading
// the saved LSE, the cuBLAS products for dE and dC — is stage 01's, inherited.
// No other [N,V] buffer exists.
#pragma once

#include <memory>

#include "stages/01_materialized/materialized.h"

namespace cce::s02 {

class OnlineSoftmaxStage : public s01::MaterializedStage {
 public:
  std::string name() const override { return "02_online_softmax"; }
  std::string summary() const override { return "one-pass online softmax over the logits, saved LSE"; }

 protected:
  // One pass over each row with a running max and sum.
  void row_losses(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                  cudaStream_t stream) override;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s02
