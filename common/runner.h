// Runs one stage on one problem: uploads the inputs, owns the outputs, runs
// forward (and backward), downloads, checks against the reference, times, and
// measures device memory. The stage executables, the GPU tests and the
// benchmarks all go through this class.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/reference.h"
#include "common/stage.h"
#include "common/upstream.h"

namespace cce {

struct HostOutputs {
  std::vector<float> loss, lse, de, dc;  // de, dc converted to float
};

// Deprecated name of seeded_upstream (common/upstream.h), kept for the GPU
// tests and benchmarks that call it: 1 for mean and sum; for none, a seeded
// U(0.5, 1.5) per token. The executables now default to ones_upstream.
inline std::vector<float> default_upstream(const Problem& problem, uint64_t seed) {
  return seeded_upstream(problem, seed);
}

class StageRunner {
 public:
  StageRunner(Stage& stage, const Problem& problem, const HostInputs& inputs, std::vector<float> upstream);

  void poison_outputs();  // loss, LSE and (once allocated) dE, dC
  void forward();
  void forward_backward();  // Stage::loss_and_gradient
  // The forward and the backward as two calls, as autograd makes them (the
  // backward then cannot be planned with the forward).
  void forward_then_backward();
  void synchronize();
  HostOutputs download() const;

  // Medians over `iters` timed runs after `warmup` untimed ones.
  double time_forward_ms(int iters, int warmup = 2);
  double time_forward_backward_ms(int iters, int warmup = 2);

  const Problem& problem() const { return problem_; }
  const std::vector<float>& upstream() const { return upstream_; }
  size_t input_bytes() const { return inputs_.bytes(); }
  // Peak tracked bytes beyond the inputs since construction (or the last
  // reset_peak_memory()), as measured by the allocation tracker.
  size_t peak_beyond_inputs() const;
  void reset_peak_memory();
  // The same quantity from the memory model: outputs + the stage's workspace.
  std::vector<MemoryItem> memory_model(bool backward) const;

 private:
  void allocate_gradients();  // on the first forward_backward(): forward-only runs don't pay for dE, dC
  Stage& stage_;
  Problem problem_;
  std::vector<float> upstream_;
  size_t baseline_bytes_ = 0;  // tracked bytes before the inputs (the cuBLAS workspace)
  DeviceInputs inputs_;
  DeviceBuffer<float> loss_, lse_, upstream_dev_;
  DeviceBuffer<uint8_t> de_, dc_;
};

struct CheckReport {
  std::vector<Comparison> comparisons;
  std::string note;  // what was and was not compared
  bool passed() const;
};

// Compares `outputs` with the reference, each element within the bound the
// arithmetic allows (common/error_bound.h), widened by what the stage leaves
// out on purpose (Stage::gradient_approximation). When N·V exceeds
// `full_limit`, only `sampled_rows` rows are compared (LSE, per-token loss for
// none, dE rows).
CheckReport check_outputs(const Problem& problem, const HostInputs& inputs, const HostOutputs& outputs,
                          const std::vector<float>& upstream, bool backward, int64_t full_limit = int64_t{1} << 26,
                          int sampled_rows = 8, GradientApproximation approximation = {});

}  // namespace cce
