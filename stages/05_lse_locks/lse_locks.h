// Stage 05: a 2D-grid log-sum-exp, merged across vocabulary blocks under a lock.
//
// The grid is (token blocks × vocabulary blocks), one logits tile each: a
// thread block computes E_tile·C_tileᵀ over the full D on tensor cores (the
// tile product of stage 03), reduces it to a partial LSE per row over its
// vocabulary block, then takes its token block's spin lock and merges the
// partials into the global fp32 LSE with logaddexp. The blocks are launched in
// groups of kGroupTokenBlocks token blocks per vocabulary block, so that
// blocks running at the same time share tiles of C (and of E) in L2.
// Loss = LSE − softcap(C_t·E_i), the target term from stage 04's kernel.
// Device memory besides inputs and outputs: a lock per token block, the
// target dot [N] and, for mean and sum, the per-token loss [N].
#pragma once

#include <memory>

#include "common/stage.h"

namespace cce::s05 {

constexpr int64_t kGroupTokenBlocks = 8;

struct LockedGrid {
  int64_t token_blocks = 0, vocab_blocks = 0;
  int path = 0;  // the tile product (see s03::describe_path)
  int64_t blocks() const { return token_blocks * vocab_blocks; }
};
LockedGrid plan_locked_grid(const Problem& problem);

// LSE [N] of every token; locks: [token_blocks] ints of scratch.
// column_sums: null, or [V] floats that receive Σ_i z_ij (stage 07's sorting statistic).
void locked_lse(const DeviceInputs& in, const LockedGrid& grid, int* locks, float* lse, float* column_sums,
                cudaStream_t stream);

class LseLocksStage : public Stage {
 public:
  std::string name() const override { return "05_lse_locks"; }
  std::string summary() const override {
    return "2D grid (token blocks x vocabulary blocks), partial LSEs merged under a per-token-block lock";
  }
  bool has_backward() const override { return false; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  std::vector<std::string> report_lines() const override;
  void release_workspace() override;
  // Stage 07: also accumulate Σ_i z_ij per vocabulary entry into `sums` [V]
  // (owned by the caller) during the forward. Null turns it off.
  void accumulate_column_sums(float* sums) { column_sums_ = sums; }

 private:
  float* column_sums_ = nullptr;
  LockedGrid grid_;
  DeviceBuffer<int> locks_;
  DeviceBuffer<float> dot_, loss_per_token_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s05
