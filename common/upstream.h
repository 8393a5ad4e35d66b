// The upstream gradient: dloss, the gradient of whatever the loss feeds into
// with respect to the loss (PyTorch's `loss.backward(dloss)`). One value for
// reduction mean and sum, N values (one per token) for none. The backward
// scales every token's gradient by it (see g_i in docs/README.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"

namespace cce {

// Ones: 1 for mean and sum, N ones for none. What `loss.backward()` (mean,
// sum) and `loss.sum().backward()` (none) use, and the executables' default.
std::vector<float> ones_upstream(const Problem& problem);

// 1 for mean and sum; for none, a seeded U(0.5, 1.5) per token, so that tests
// exercise per-token scaling (`--upstream random` in the executables).
std::vector<float> seeded_upstream(const Problem& problem, uint64_t seed);

// Reads a dloss.npy: float32, shape [] or [1] for mean and sum, [N] for none,
// every value finite. Throws InputError (one line, naming the file) otherwise.
std::vector<float> read_upstream(const std::string& path, const Problem& problem);

// Writes `upstream` as dloss.npy: shape [] for mean and sum (a 0-d array, like
// the loss PyTorch returns), [N] for none.
void write_upstream(const std::string& path, const Problem& problem, const std::vector<float>& upstream);

// The upstream gradient of a stage executable run, and a line saying where it
// came from. mode is the --upstream flag: "ones" or "random" ("" = not given).
// With a load directory, its dloss.npy (when present) is the upstream
// gradient, and an explicit --upstream is refused beside it.
struct Upstream {
  std::vector<float> values;
  std::string description;  // "ones, as loss.backward()", "loaded from DIR/dloss.npy", ...
};
// Checks the --upstream value against the problem (before any data is made).
void validate_upstream_mode(const std::string& mode, const Problem& problem);
Upstream choose_upstream(const std::string& mode, const Problem& problem, const std::string& load_dir,
                         uint64_t seed);

}  // namespace cce
