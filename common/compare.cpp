#include "common/compare.h"

#include <cmath>
#include <cstdio>

namespace cce {

std::string Comparison::summary() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-5s %s  max abs err %.3e  max rel err %.3e  rel L2 err %.3e  (%lld/%lld mismatches)",
                name.c_str(), passed() ? "ok  " : "FAIL", max_abs_error, max_rel_error, rel_l2_error,
                static_cast<long long>(mismatches), static_cast<long long>(count));
  return buf;
}

Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   Tolerance tol, int64_t columns) {
  Comparison c;
  c.name = name;
  c.count = static_cast<int64_t>(want.size());
  if (got.size() != want.size()) {
    c.mismatches = c.count > 0 ? c.count : 1;
    c.first_mismatches.push_back(name + ": size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
    return c;
  }
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    double x = got[i], ref = want[i], err = std::fabs(x - ref);
    bool bad = !std::isfinite(x) || err > tol.atol + tol.rtol * std::fabs(ref);
    if (std::isfinite(x)) {
      c.max_abs_error = std::max(c.max_abs_error, err);
      c.max_rel_error = std::max(c.max_rel_error, err / std::max(std::fabs(ref), 1e-30));
      err2 += err * err;
    } else {
      c.max_abs_error = c.max_rel_error = INFINITY;
    }
    ref2 += ref * ref;
    if (bad) {
      if (c.mismatches < 5) {
        char buf[160];
        std::string where = columns > 0 ? std::to_string(i / columns) + "," + std::to_string(i % columns)
                                        : std::to_string(i);
        std::snprintf(buf, sizeof buf, "%s[%s]: got %.9g want %.9g", name.c_str(), where.c_str(), x, ref);
        c.first_mismatches.push_back(buf);
      }
      ++c.mismatches;
    }
  }
  c.rel_l2_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return c;
}

Tolerance forward_tolerance(bool bf16) {
  // LSE and loss are O(1..10) and accumulate V terms of fp32 products.
  return bf16 ? Tolerance{2e-3, 2e-3} : Tolerance{1e-3, 1e-3};
}

Tolerance gradient_tolerance(bool bf16, double scale) {
  return bf16 ? Tolerance{2e-2 * scale, 2e-2} : Tolerance{2e-3 * scale, 2e-3};
}

double max_abs(const std::vector<double>& values) {
  double m = 0.0;
  for (double v : values) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace cce
