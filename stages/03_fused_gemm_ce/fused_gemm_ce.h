// Stage 03: fused GEMM + online softmax. The logits exist only as on-chip tiles.
//
// A thread block owns BM rows of E and walks a range of the vocabulary in
// tiles of BN rows of C: each logits tile E_tile·C_tileᵀ is computed on chip
// (tensor cores for bf16, see tile_product.cuh) and folded at once into
// per-row running max and sum; the target logit is picked up as its tile
// passes. To give every multiprocessor work when N/BM is small, the vocabulary
// is split into S ranges (grid = token blocks × S); each block leaves one
// (max, sum) pair per row, and a small kernel merges the S pairs into the LSE
// and the loss. Device memory besides inputs and outputs: S·N·8 + N·4 bytes.
// Stage 05 replaces that second kernel by a merge under a lock.
#pragma once

#include <memory>

#include "common/stage.h"

namespace cce::s03 {

// How the vocabulary is split for a problem on the current device.
struct VocabSplit {
  int64_t token_blocks = 0, vocab_tiles = 0, splits = 0, tiles_per_split = 0;
  int path = 0;  // which tile product runs (see describe_path)
};
// splits = 0: as many ranges as fill one wave of resident blocks; 1: one
// block per token block (the plain 1D grid); k: k ranges.
VocabSplit plan_vocab_split(const Problem& problem, int64_t splits = 0);
std::string describe_path(const VocabSplit& split);

// LSE [N] and the per-token loss [N] (0 for ignored tokens) with the fused kernel.
// partial: [splits·N] float2 scratch; target_logit: [N] scratch.
// LSE only (stage 04 on): pass target_logit = loss_per_token = nullptr.
void fused_lse_and_loss(const DeviceInputs& in, const VocabSplit& split, float2* partial, float* target_logit,
                        float* lse, float* loss_per_token, cudaStream_t stream);

class FusedGemmCeStage : public Stage {
 public:
  std::string name() const override { return "03_fused_gemm_ce"; }
  std::string summary() const override { return "fused GEMM + online softmax: logits only as on-chip tiles"; }
  bool has_backward() const override { return false; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  std::vector<std::string> report_lines() const override;
  void release_workspace() override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;

 private:
  int64_t requested_splits_ = 0;  // --vocab-splits
  VocabSplit split_;
  DeviceBuffer<float2> partial_;
  DeviceBuffer<float> target_logit_, loss_per_token_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s03
