// Comparison of a result against the reference: |x − ref| <= atol + rtol·|ref|
// for every element (atol one value, or one per element: the bound the
// arithmetic allows, common/error_bound.h), with the largest absolute and
// relative errors, the relative L2 error ‖x − ref‖/‖ref‖, how much of its
// bound the worst element uses, and the first few mismatches. A NaN or Inf in
// x is always a mismatch, and so is a size that differs from the reference's.
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
  double allowed_rel_l2 = 0.0;   // ‖bound‖/‖ref‖: the relative L2 error the elementwise bound allows
  double worst_bound_use = 0.0;  // max |x − ref| / bound over the elements (≤ 1 when passed)
  std::vector<std::string> first_mismatches;  // "de[3,17]: got 0.1 want 0.2"
  bool passed() const { return mismatches == 0 && count > 0; }
  std::string summary() const;                // one line
};

// `columns` > 0 prints the index of a mismatch as [row,col].
Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   Tolerance tol, int64_t columns = 0);
// atol[i] for element i (the reference's bound), rtol for all.
Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& atol, double rtol, int64_t columns = 0);

double max_abs(const std::vector<double>& values);

}  // namespace cce
