// Stage 02: online-softmax cross-entropy over cuBLAS logits.
//
// Uses: stage 01's gemm_logits, materialized_scratch and
// backward_through_logits.
//
// The logits still come from cuBLAS into an fp32 [N,V] buffer (stage 01's
// gemm_logits), but each row is read once: every thread folds its share of the
// row into an OnlineSoftmax state (running max, rescaled running sum), the
// block merges the states, and the LSE is saved. Everything else — the
// logits buffer, the backward that rewrites it as dlogit in one pass reading
// the saved LSE, the cuBLAS products for dE and dC — is stage 01's, called.
// No other [N,V] buffer exists.
#pragma once

#include <memory>

#include "stages/01_materialized/materialized.h"

namespace cce::s02 {

// LSE_i and loss_i from the fp32 logits [N,V] in one pass per row.
void online_cross_entropy_rows(const DeviceInputs& in, const float* logits, float* lse, float* loss_per_token,
                               cudaStream_t stream);

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s02
