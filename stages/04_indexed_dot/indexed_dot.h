// Stage 04: the target term C_{t_i}·E_i as its own kernel, an indexed dot product.
// Uses: stage 03's fused LSE (LSE-only mode, plan_fused, fused_lse);
// common/token_reduction.
//
// loss_i = LSE_i − z_{i,t_i} has two parts. The LSE comes from stage 03's fused
// kernel in its LSE-only mode; the target logit is now computed apart: for each
// token, gather row t_i of C and row i of E and dot them. That is only N·D
// multiply-adds, so the kernel is bound by memory and by how many blocks are in
// flight, not by arithmetic.
//
// Two layouts of the same dot product (--variant):
//   2d (default): grid = token blocks × D slices. A block of 256 threads holds
//       8 tokens, a warp each; the warp dots a slice of 256 elements of D and
//       adds its partial sum into dot[i] with atomicAdd (dot zeroed first).
//   1d: grid = token blocks only. Same block, but each warp walks all of D and
//       writes dot[i] directly: no atomics, no zeroing, N/8 blocks in all.
// The dot is the raw logit C_{t_i}·E_i; a finalize kernel applies the softcap
// once the sum is complete: loss_i = LSE_i − softcap(dot_i), 0 for ignored tokens.
// Device memory besides inputs and outputs: stage 03's S·N·8 + dot N·4 (+ N·4
// per-token loss for mean and sum). bench/indexed_dot_variants times the two
// layouts against each other.
#pragma once

#include <memory>
#include <string>

#include "common/stage.h"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

namespace cce::s04 {

enum class DotVariant { k2d, k1d };
// "2d" | "1d"; throws InputError (one line) for anything else.
DotVariant parse_dot_variant(const std::string& text);
const char* to_string(DotVariant variant);

// Block shape shared by both variants: a warp per token, 8 tokens per block.
constexpr int kDotThreads = 256;
constexpr int kTokensPerBlock = kDotThreads / 32;
// Elements of D one warp covers per block in the 2d variant.
constexpr int64_t kSliceD = 256;

// The grid a variant launches: token_blocks × d_slices (d_slices = 1 for 1d).
struct DotGrid {
  int64_t token_blocks = 0, d_slices = 0;
  int64_t blocks() const { return token_blocks * d_slices; }
};
DotGrid plan_indexed_dot(const Problem& problem, DotVariant variant);

// dot[i] = C_{t_i}·E_i (raw, no softcap) in fp32, 0 for ignored tokens. dot: [N] device.
void indexed_dot(const DeviceInputs& in, DotVariant variant, float* dot, cudaStream_t stream);

// loss_per_token[i] = LSE_i − softcap(dot_i), 0 for ignored tokens. All [N] device.
void finalize_token_loss(const Problem& problem, const int64_t* targets, const float* lse, const float* dot,
                         float* loss_per_token, cudaStream_t stream);

// The scratch of the target term: dot [N].
std::vector<MemoryItem> dot_scratch(const Problem& problem);

class IndexedDotStage : public ForwardOnlyStage {
 public:
  std::string name() const override { return "04_indexed_dot"; }
  std::string summary() const override {
    return "target term C_t.E_i as an indexed dot product on a 2D grid (token blocks x D slices) with atomics";
  }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void add_options(OptionParser& parser) override;
  std::vector<std::string> report_lines() const override;
  // Throws InputError for a bad --variant (the driver calls it right after parsing).
  void validate_options() const override { parse_dot_variant(variant_text_); }

 private:
  std::string variant_text_ = "2d";  // --variant
  DotVariant variant_ = DotVariant::k2d;
  s03::FusedPlan plan_{};
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s04
