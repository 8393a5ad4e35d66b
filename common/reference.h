// The CPU reference every stage is checked against: Eigen, accumulating in double.
//
// Written once. It computes, for the rows it is asked for, the logits
// E_i·C_jᵀ (softcapped when set), LSE_i, loss_i = LSE_i − logit_{i,t_i} (0 for
// ignored tokens), the reduced loss, and for a given upstream gradient
//   dlogit_ij = g_i · (softmax_ij − [j = t_i]) · softcap'(logit_ij),
//   dE = dlogit · C,   dC = dlogitᵀ · E,
// where g_i is upstream/#valid (mean), upstream (sum) or upstream_i (none).
#pragma once

#include <cstdint>
#include <vector>

#include "common/error_bound.h"
#include "common/host_data.h"
#include "common/problem.h"

namespace cce {

struct ReferenceOptions {
  bool backward = false;
  // Upstream gradient of the loss: one value for mean and sum, N values for none.
  std::vector<float> upstream = {1.0f};
  // Rows (tokens) to compute; empty = all of them. With a subset, the reduced
  // loss and dC cannot be formed (they need every row) and are left empty.
  std::vector<int64_t> rows;
  // Also the bound the arithmetic allows on each output (common/error_bound.h),
  // for a stage that runs in the problem's dtype and leaves out `approximation`.
  bool bounds = false;
  GradientApproximation approximation;
};

struct ReferenceResult {
  std::vector<int64_t> rows;          // the tokens computed, in order
  std::vector<double> lse;            // [rows]
  std::vector<double> loss_per_token; // [rows]; 0 for ignored tokens
  bool all_rows = false;
  double loss = 0.0;                  // reduced loss (mean or sum); only when all_rows
  std::vector<double> de;             // [rows, D] when backward
  std::vector<double> dc;             // [V, D] when backward and all_rows
  // With options.bounds: how far a stage's value may be from each of the
  // above, |x − ref| ≤ bound + output_rtol·|ref| (common/error_bound.h).
  std::vector<double> lse_bound, loss_per_token_bound, de_bound, dc_bound;
  double loss_bound = 0.0;
  double output_rtol = 0.0;           // the gradient outputs' own rounding (0 for loss and LSE)
};

ReferenceResult reference_cross_entropy(const Problem& problem, const HostInputs& inputs,
                                        const ReferenceOptions& options);

// g_i for token i (see above); 0 for an ignored token.
double upstream_for_token(const Problem& problem, const std::vector<float>& upstream, int64_t n_valid, int64_t i,
                          int64_t target);

}  // namespace cce
