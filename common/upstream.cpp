#include "common/upstream.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "common/check.h"
#include "common/npy.h"

namespace cce {

namespace {
int64_t per_token_count(const Problem& p) { return p.reduction == Reduction::kNone ? p.n : 1; }
}  // namespace

std::vector<float> ones_upstream(const Problem& p) { return std::vector<float>(per_token_count(p), 1.0f); }

std::vector<float> seeded_upstream(const Problem& p, uint64_t seed) {
  if (p.reduction != Reduction::kNone) return {1.0f};
  std::mt19937_64 rng(seed ^ 0x5EEDull);
  std::uniform_real_distribution<float> dist(0.5f, 1.5f);
  std::vector<float> g(p.n);
  for (float& x : g) x = dist(rng);
  return g;
}

std::vector<float> read_upstream(const std::string& path, const Problem& p) {
  NpyArray a = read_npy(path);
  // float32 only: a float64 dloss would be rounded silently, and PyTorch's
  // float32 loss gives a float32 gradient.
  if (a.dtype != "<f4")
    throw InputError(path + ": expected float32 (<f4), found dtype " + a.dtype + " (save dloss.float())");
  std::string shape = "[";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? "," : "") + std::to_string(a.shape[i]);
  shape += "]";
  if (p.reduction == Reduction::kNone) {
    if (a.shape.size() != 1 || a.shape[0] != p.n)
      throw InputError(path + ": expected shape [" + std::to_string(p.n) +
                       "] (one value per token, for --reduction none), got " + shape +
                       (a.element_count() == 1 ? " (a single value goes with --reduction mean or sum)" : ""));
  } else if (a.element_count() != 1 || a.shape.size() > 1) {
    throw InputError(path + ": expected shape [] or [1] (one value, for --reduction " + to_string(p.reduction) +
                     "), got " + shape +
                     (a.shape.size() == 1 && a.shape[0] == p.n ? " (one value per token goes with --reduction none)"
                                                              : ""));
  }
  std::vector<float> values(a.element_count());
  std::memcpy(values.data(), a.data.data(), values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw InputError(path + ": value " + std::to_string(values[i]) + " at position " + std::to_string(i) +
                       " is not finite");
  return values;
}

void write_upstream(const std::string& path, const Problem& p, const std::vector<float>& upstream) {
  std::vector<int64_t> shape;
  if (p.reduction == Reduction::kNone) shape = {p.n};
  write_npy(path, upstream.data(), shape);
}

void validate_upstream_mode(const std::string& mode, const Problem& p) {
  if (mode.empty() || mode == "ones") return;
  if (mode != "random") throw InputError("--upstream must be ones or random, got '" + mode + "'");
  if (p.reduction != Reduction::kNone)
    throw InputError("--upstream random draws one value per token: it needs --reduction none (mean and sum take "
                     "a single upstream value, 1)");
}

Upstream choose_upstream(const std::string& mode, const Problem& p, const std::string& load_dir, uint64_t seed) {
  validate_upstream_mode(mode, p);
  if (!load_dir.empty()) {
    const std::string path = (std::filesystem::path(load_dir) / "dloss.npy").string();
    if (std::filesystem::exists(path)) {
      if (!mode.empty())
        throw InputError("--upstream " + mode + ": " + path +
                         " already gives the upstream gradient; drop --upstream or remove the file");
      return {read_upstream(path, p), "loaded from " + path + ", as loss.backward(dloss)"};
    }
  }
  if (mode == "random")
    return {seeded_upstream(p, seed), "seeded U(0.5,1.5) per token (--upstream random, seed " + std::to_string(seed) +
                                          ")"};
  return {ones_upstream(p), p.reduction == Reduction::kNone ? "ones, as loss.sum().backward()"
                                                             : "ones, as loss.backward()"};
}

}  // namespace cce
