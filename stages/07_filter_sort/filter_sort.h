// Stage 07: gradient filtering and vocabulary sorting.
// Uses: stage 05's locked LSE (its epilogue, locked_lse.cuh) and forward
// tail; stage 06's backward building blocks (backward_tile.cuh,
// backward_products.cuh, prepare_backward/finish_backward); common/tile
// (units, launch, column sums); cub's radix sort.
//
// Sorting: the forward also sums each vocabulary entry's logit over the
// batch (an epilogue that adds the tile's column sums to stage 05's fold);
// the backward visits the vocabulary in descending order of that sum, so
// that the entries that matter for many tokens share tiles and the rest
// form whole tiles of negligible gradient. The order is a permutation of the
// tile columns into C and dC: C is never copied.
// Filtering: in this stage's backward kernel, a (token block × vocabulary
// tile) whose every |(p − onehot)·softcap'| is below eps skips its two
// products, dE and dC. The dropped terms are each below eps (times g_i),
// which bounds the error (see README.md).
#pragma once

#include <memory>

#include "common/stage.h"
#include "stages/06_fused_backward/fused_backward.h"

namespace cce::s07 {

// Default eps: 2^-12 for bf16 inputs, 2^-28 for fp32.
float default_filter_eps(Dtype dtype);

struct FilterStats {
  int64_t tiles = 0, kept_tiles = 0;
};

class FilterSortStage : public Stage {
 public:
  std::string name() const override { return "07_filter_sort"; }
  std::string summary() const override { return "gradient filtering and vocabulary sorting"; }
  bool has_backward() const override { return true; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;
  std::vector<std::string> report_lines() const override;
  // Filtering leaves out the terms of tiles whose every |u_ij| < eps.
  GradientApproximation gradient_approximation() const override { return {filter_eps(last_problem_.dtype), false}; }

  // After a synchronized backward: tiles in all, and those that ran the products.
  FilterStats stats() const;
  float filter_eps(Dtype dtype) const;  // 0 when filtering is off

 private:
  void sort_vocabulary(const Problem& problem, cudaStream_t stream);

  double filter_eps_flag_ = 0.0;  // --filter-eps; 0 = the dtype's default
  bool no_filter_ = false, no_sort_ = false;
  Problem last_problem_;  // of the last forward, for report_lines
  s06::BackwardPlan plan_{};
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s07
