#include "common/problem.h"

#include <cmath>

#include "common/check.h"

namespace cce {

void Problem::validate() const {
  if (n <= 0 || d <= 0 || v <= 0)
    throw InputError("N, D and V must be positive (got N=" + std::to_string(n) + " D=" + std::to_string(d) +
                     " V=" + std::to_string(v) + ")");
  if (n > (int64_t{1} << 31) - 1 || d > (int64_t{1} << 31) - 1 || v > (int64_t{1} << 31) - 1)
    throw InputError("N, D and V must each be below 2^31");
  if (!std::isfinite(softcap) || softcap < 0.0f)
    throw InputError("softcap must be a finite number >= 0 (0 turns it off), got " + std::to_string(softcap));
  if (ignore_index >= 0 && ignore_index < v)
    throw InputError("ignore_index " + std::to_string(ignore_index) + " is a valid vocabulary index (V=" +
                     std::to_string(v) + "); use a negative value such as -100");
}

std::string Problem::describe() const {
  std::string s = "N=" + std::to_string(n) + " D=" + std::to_string(d) + " V=" + std::to_string(v) + " " +
                  to_string(dtype) + " " + to_string(reduction);
  if (has_softcap()) s += " softcap=" + std::to_string(softcap);
  return s;
}

const char* to_string(Dtype dtype) { return dtype == Dtype::kBFloat16 ? "bf16" : "fp32"; }

const char* to_string(Reduction reduction) {
  switch (reduction) {
    case Reduction::kMean: return "mean";
    case Reduction::kSum: return "sum";
    case Reduction::kNone: return "none";
  }
  return "?";
}

Dtype parse_dtype(const std::string& text) {
  if (text == "bf16") return Dtype::kBFloat16;
  if (text == "fp32") return Dtype::kFloat32;
  throw InputError("unsupported dtype '" + text + "' (expected bf16 or fp32)");
}

Reduction parse_reduction(const std::string& text) {
  if (text == "mean") return Reduction::kMean;
  if (text == "sum") return Reduction::kSum;
  if (text == "none") return Reduction::kNone;
  throw InputError("unknown reduction '" + text + "' (expected mean, sum or none)");
}

}  // namespace cce
