#include "common/compare.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace cce {

std::string Comparison::summary() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%-5s %s  max abs err %.3e  max rel err %.3e  rel L2 err %.3e (allowed %.1e)  worst %.2f of its bound  "
                "(%lld/%lld mismatches)",
                name.c_str(), passed() ? "ok  " : "FAIL", max_abs_error, max_rel_error, rel_l2_error, allowed_rel_l2,
                worst_bound_use, static_cast<long long>(mismatches), static_cast<long long>(count));
  return buf;
}

namespace {

// The one loop behind both compare()s: atol_of(i) is element i's absolute bound.
template <typename AbsoluteBound>
Comparison compare_elements(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                            AbsoluteBound atol_of, double rtol, int64_t columns) {
  Comparison c;
  c.name = name;
  c.count = static_cast<int64_t>(want.size());
  if (got.size() != want.size()) {
    c.mismatches = c.count > 0 ? c.count : 1;
    c.worst_bound_use = INFINITY;
    c.first_mismatches.push_back(name + ": size " + std::to_string(got.size()) + " != " + std::to_string(want.size()));
    return c;
  }
  double err2 = 0.0, ref2 = 0.0, bound2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double x = got[i], ref = want[i], err = std::fabs(x - ref);
    const double bound = atol_of(i) + rtol * std::fabs(ref);
    const bool bad = !std::isfinite(x) || !(err <= bound);
    if (std::isfinite(x)) {
      c.max_abs_error = std::max(c.max_abs_error, err);
      c.max_rel_error = std::max(c.max_rel_error, err / std::max(std::fabs(ref), 1e-30));
      c.worst_bound_use = std::max(c.worst_bound_use, bound > 0.0 ? err / bound : err > 0.0 ? INFINITY : 0.0);
      err2 += err * err;
    } else {
      c.max_abs_error = c.max_rel_error = c.worst_bound_use = INFINITY;
    }
    ref2 += ref * ref;
    bound2 += bound * bound;
    if (bad) {
      if (c.mismatches < 5) {
        char buf[200];
        std::string where = columns > 0 ? std::to_string(i / columns) + "," + std::to_string(i % columns)
                                        : std::to_string(i);
        std::snprintf(buf, sizeof buf, "%s[%s]: got %.9g want %.9g (allowed ±%.3g)", name.c_str(), where.c_str(), x,
                      ref, bound);
        c.first_mismatches.push_back(buf);
      }
      ++c.mismatches;
    }
  }
  c.rel_l2_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  c.allowed_rel_l2 = ref2 > 0 ? std::sqrt(bound2 / ref2) : std::sqrt(bound2);
  return c;
}

}  // namespace

Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   Tolerance tol, int64_t columns) {
  return compare_elements(name, got, want, [&](size_t) { return tol.atol; }, tol.rtol, columns);
}

Comparison compare(const std::string& name, const std::vector<float>& got, const std::vector<double>& want,
                   const std::vector<double>& atol, double rtol, int64_t columns) {
  if (atol.size() != want.size())
    throw std::invalid_argument("compare " + name + ": " + std::to_string(atol.size()) + " bounds for " +
                                std::to_string(want.size()) + " elements");
  return compare_elements(name, got, want, [&](size_t i) { return atol[i]; }, rtol, columns);
}

double max_abs(const std::vector<double>& values) {
  double m = 0.0;
  for (double v : values) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace cce
