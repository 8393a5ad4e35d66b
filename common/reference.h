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
};

struct ReferenceResult {
  std::vector<int64_t> rows;          // the tokens computed, in order
  std::vector<double> lse;            // [rows]
  std::vector<double> loss_per_token; // [rows]; 0 for ignored tokens
  bool all_rows = false;
  double loss = 0.0;                  // reduced loss (mean or sum); only when all_rows
  std::vector<double> de;             // [rows, D] when backward
  std::vector<double> dc;             // [V, D] when backward and all_rows
};

ReferenceResult reference_cross_entropy(const Problem& problem, const HostInputs& inputs,
                                        const ReferenceOptions& options);

// g_i for token i (see above); 0 for an ignored token.
double upstream_for_token(const Problem& problem, const std::vector<float>& upstream, int64_t n_valid, int64_t i,
                          int64_t target);

}  // namespace cce
