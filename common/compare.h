// Comparison of a result against the reference: |x − ref| <= atol + rtol·|ref|
// for every element, with the largest absolute and relative errors, the
// relative L2 error ‖x − ref‖/‖ref‖, and the first few mismatches. A NaN or Inf
// in x is always a mismatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cce {

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

struct Comparison {
  std::string name;
  int64_t count = 0;
  int64_t mismatches = 0;
  double max_abs_error = 0.0;
  double max_rel_error = 0.0;  // |x − ref| / max(|ref|, tiny), over all elements
  double rel_l2_error = 0.0;
  std::vector<std::string> first_mismatches;  // "de[3,17]: got 0.1 want 0.2"
  bool passed() const { return mismatches == 0 && count > 0; }
  std::string summary() const;                // one line
};

// `columns` > 0 prints the index of a mismatch as [row,col].
Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   Tolerance tol, int64_t columns = 0);

// Default tolerances for an output whose reference has the given scale
// (max |ref|): rtol for the elementwise bound, atol = atol_factor·scale.
// bf16 inputs with fp32 accumulation: the inputs are the same bf16 values as
// the reference's, so the forward error is fp32 accumulation order only, while
// bf16 gradient outputs carry bf16 rounding (2^-8 relative).
Tolerance forward_tolerance(bool bf16);
Tolerance gradient_tolerance(bool bf16, double scale);

double max_abs(const std::vector<double>& values);

}  // namespace cce
