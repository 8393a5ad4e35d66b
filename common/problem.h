// The problem every stage solves, in the repository's notation:
//   E [N,D] hidden states, C [V,D] classifier, t [N] targets,
//   logit_ij = C_j·E_i (then s·tanh(logit/s) when a softcap s is set),
//   LSE_i = log Σ_j exp(logit_ij),  loss_i = LSE_i − logit_{i,t_i}.
// Tokens whose target equals ignore_index contribute no loss and no gradient.
#pragma once

#include <cstdint>
#include <string>

namespace cce {

// The one default problem of the stage executables and the tour: Gemma-2's
// hidden size and vocabulary with 2048 tokens, which every stage fits on a
// 16 GB GPU (stage 01's fp32 logits take 2.1 GB at this N). README.md quotes it.
constexpr int64_t kDefaultN = 2048;
constexpr int64_t kDefaultD = 2304;
constexpr int64_t kDefaultV = 256000;

enum class Dtype { kFloat32, kBFloat16 };
enum class Reduction { kMean, kSum, kNone };

struct Problem {
  int64_t n = 0;  // tokens
  int64_t d = 0;  // hidden size
  int64_t v = 0;  // vocabulary size
  Dtype dtype = Dtype::kBFloat16;
  int64_t ignore_index = -100;
  // mean: Σ loss_i / #valid tokens; with no valid token at all the loss is
  // defined as 0 and every gradient as 0 (PyTorch would return 0/0 = NaN).
  Reduction reduction = Reduction::kMean;
  float softcap = 0.0f;  // 0 = off; otherwise logit → s·tanh(logit/s)

  bool has_softcap() const { return softcap > 0.0f; }
  // The same problem over `rows` of the tokens (a chunk or a sample of them).
  Problem with_tokens(int64_t rows) const {
    Problem part = *this;
    part.n = rows;
    return part;
  }
  size_t element_bytes() const { return dtype == Dtype::kBFloat16 ? 2 : 4; }
  bool operator==(const Problem& o) const {
    return n == o.n && d == o.d && v == o.v && dtype == o.dtype && ignore_index == o.ignore_index &&
           reduction == o.reduction && softcap == o.softcap;
  }
  // Throws InputError with a one-line message when a field is out of range.
  void validate() const;
  std::string describe() const;  // "N=77 D=100 V=1129 bf16 mean"
};

const char* to_string(Dtype dtype);
const char* to_string(Reduction reduction);
Dtype parse_dtype(const std::string& text);          // "bf16" | "fp32"
Reduction parse_reduction(const std::string& text);  // "mean" | "sum" | "none"

}  // namespace cce
