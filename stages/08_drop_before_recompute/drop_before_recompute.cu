// Stage 08's class: its flags, memory model and the order of its steps (the
// steps themselves: sorted_forward.cu, decision.cu, tail_correction.cu,
// kept_backward.cu).
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/check.h"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"
#include "stages/06_fused_backward/fused_backward.h"

namespace cce::s08 {
namespace {

// A loss alone: stage 03's forward with its vocabulary split into at most
// kLossMaxRanges ranges per token block, fewer where N is large, so that the
// ranges' (max, sum) pairs stay under kLossPartialBytes (WORKLOG.md).
constexpr int64_t kLossMaxRanges = 4;
constexpr int64_t kLossPartialBytes = int64_t{768} << 10;
s03::FusedPlan loss_only_plan(const Problem& p) {
  const int64_t fit = kLossPartialBytes / (8 * std::max<int64_t>(p.n, 1));
  return s03::plan_fused(p, std::clamp<int64_t>(fit, 1, kLossMaxRanges));
}

// The backward's own buffers, beside the forward's and stage 06's accumulators.
struct BackwardBuffers {
  uint8_t* keep;        // [tiles][token blocks]
  int* kept_per_tile;   // [tiles]
  int2* pairs;          // [pairs]: the kept ones, kept_pair_list's order
  float* coefficient;   // [N]: the dropped targets' a_i
  float* tail_sums;     // [tiles][D]: G_T
};
std::vector<MemoryItem> backward_items(const Problem& p) {
  const TileGrid grid = tile_grid(p);
  const size_t pairs = static_cast<size_t>(grid.pairs()), tiles = static_cast<size_t>(grid.tiles);
  return {{"keep flags [tiles][token blocks]", pairs},
          {"kept per tile [tiles]", tiles * 4},
          {"kept pairs [pairs]", pairs * 8},
          {"target coefficient [N]", static_cast<size_t>(p.n) * 4},
          {"dC tail sums [tiles][D]", tiles * static_cast<size_t>(p.d) * 4}};
}
BackwardBuffers backward_buffers(const Scratch& scratch) {
  return {scratch.get<uint8_t>("keep flags [tiles][token blocks]"), scratch.get<int>("kept per tile [tiles]"),
          scratch.get<int2>("kept pairs [pairs]"), scratch.get<float>("target coefficient [N]"),
          scratch.get<float>("dC tail sums [tiles][D]")};
}

}  // namespace

std::vector<MemoryItem> loss_only_items(const Problem& p) {
  return concat(s03::fused_lse_scratch(p, loss_only_plan(p), true), per_token_loss_scratch(p));
}

void loss_only_forward(const DeviceInputs& in, const Scratch& scratch, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  float* per_token = per_token_loss_buffer(p, loss, scratch);
  s03::fused_lse(in, loss_only_plan(p), scratch, lse, per_token, stream);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

float DropBeforeRecomputeStage::drop_eps(Dtype dtype) const {
  if (keep_all_) return 0.0f;
  return eps_flag_ > 0.0 ? static_cast<float>(eps_flag_) : default_drop_eps(dtype);
}

void DropBeforeRecomputeStage::add_options(OptionParser& parser) {
  parser.add_double("drop-eps", &eps_flag_,
                    "drop (token block, tile) pairs whose every softmax entry is below eps; 0 = 2^-8 (bf16), 2^-28 (fp32)");
  parser.add_flag("keep-all", &keep_all_, "recompute every tile (the exact backward)");
  parser.add_flag("no-correction", &no_correction_, "drop tiles without correcting dE and dC for them");
  parser.add_int("chunk-rows", &chunk_rows_flag_,
                 "rows of sorted C the forward gathers at once, a multiple of 256; 0 = 64 MiB of C");
}

void DropBeforeRecomputeStage::validate_options() const {
  if (!(eps_flag_ >= 0.0 && eps_flag_ < 1.0)) throw InputError("--drop-eps must be in [0, 1)");
  if (keep_all_ && eps_flag_ > 0.0) throw InputError("--drop-eps and --keep-all contradict each other");
  if (chunk_rows_flag_ < 0 || chunk_rows_flag_ % 256 != 0)
    throw InputError("--chunk-rows must be a multiple of 256 (0: the default)");
}

std::vector<MemoryItem> DropBeforeRecomputeStage::workspace(const Problem& p, bool backward) const {
  if (!backward) return loss_only_items(p);
  return concat(concat(sorted_forward_items(p, plan_sorted_forward(p, chunk_rows_flag_)), s06::backward_scratch(p)),
                backward_items(p));
}

void DropBeforeRecomputeStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  last_problem_ = p;
  statistics_ready_ = false;
  if (!backward_follows_) {
    scratch_.allocate(loss_only_items(p));
    loss_only_forward(in, scratch_, loss, lse, stream);
    return;
  }
  const SortedForwardPlan plan = plan_sorted_forward(p, chunk_rows_flag_);
  scratch_.allocate(sorted_forward_items(p, plan));
  sorted_forward(in, plan, sorted_forward_buffers(scratch_), loss, lse, scratch_, stream);
  statistics_ready_ = true;
}

void DropBeforeRecomputeStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de,
                                        void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!statistics_ready_)
    throw InputError("stage 08: backward() needs a forward() told that a backward follows (expect_backward(true))");
  statistics_ready_ = false;  // the correction overwrites the statistics
  scratch_.allocate(workspace(p, true));
  const TileGrid grid = tile_grid(p);
  const TileStatistics forward = sorted_forward_buffers(scratch_).kept;
  const BackwardBuffers buffers = backward_buffers(scratch_);
  const s06::Accumulators acc = s06::prepare_backward(in, upstream, scratch_, de, dc, stream);
  const DecisionInputs inputs{&forward, lse, acc.grad_scale, TokenBlocks{}};
  const float eps = drop_eps(p.dtype);

  // 1. Decide, and the dropped targets' coefficients.
  decide_kept_pairs(p, grid, inputs, eps, buffers.keep, buffers.kept_per_tile, stream);
  target_coefficients(p, grid, inputs, buffers.keep, buffers.coefficient, stream);
  std::vector<uint8_t> keep(static_cast<size_t>(grid.pairs()));
  if (!keep.empty()) {
    CCE_CUDA_CHECK(cudaMemcpyAsync(keep.data(), buffers.keep, keep.size(), cudaMemcpyDeviceToHost, stream));
    CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const std::vector<int2> pairs = kept_pair_list(grid, keep);
  stats_ = DropStats{grid.pairs(), static_cast<int64_t>(pairs.size()), eps};

  // 2. The tail correction (it overwrites dE's accumulator, zero until now).
  if (!no_correction_ && stats_.kept_pairs < stats_.pairs) {
    const TailSums tail{buffers.tail_sums, p.d};
    correct_dropped_tail(in, grid, inputs, buffers.keep, acc.de, tail, stream);
    add_tail_share(p, grid, tail, forward.vocabulary_order, acc.dc, stream);
  }
  // 3. The kept pairs' products; 4. the dropped targets' exact terms.
  if (!pairs.empty())  // pageable memory: the copy has read `pairs` when it returns
    CCE_CUDA_CHECK(cudaMemcpyAsync(buffers.pairs, pairs.data(), pairs.size() * sizeof(int2), cudaMemcpyHostToDevice,
                                   stream));
  backward_over_kept_pairs(in,
                           KeptBackwardInputs{buffers.pairs, static_cast<int64_t>(pairs.size()),
                                              forward.vocabulary_order, lse, acc.grad_scale, acc.de, acc.dc},
                           stream);
  add_target_terms(in, buffers.coefficient, acc.de, acc.dc, stream);
  s06::finish_backward(in, acc, de, dc, stream);
}

std::vector<uint8_t> DropBeforeRecomputeStage::keep_flags() const {
  std::vector<uint8_t> flags(static_cast<size_t>(tile_grid(last_problem_).pairs()));
  if (!flags.empty()) copy_to_host(flags.data(), backward_buffers(scratch_).keep, flags.size());
  return flags;
}

std::vector<int> DropBeforeRecomputeStage::vocabulary_order() const {
  std::vector<int> order(static_cast<size_t>(last_problem_.v));
  if (!order.empty()) copy_to_host(order.data(), sorted_forward_buffers(scratch_).kept.vocabulary_order, order.size() * 4);
  return order;
}

std::vector<std::string> DropBeforeRecomputeStage::report_lines() const {
  std::vector<std::string> lines;
  if (last_problem_.n == 0) return lines;
  const Problem& p = last_problem_;
  const TileGrid grid = tile_grid(p);
  const SortedForwardPlan plan = plan_sorted_forward(p, chunk_rows_flag_);
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "plan         %lld sorted tiles of %lld x %lld token blocks; the forward gathers %lld rows of C at once",
                static_cast<long long>(grid.tiles), static_cast<long long>(grid.tile_cols),
                static_cast<long long>(grid.token_blocks), static_cast<long long>(plan.chunk_rows));
  lines.push_back(buf);
  std::snprintf(buf, sizeof buf, "drop         %s; tail correction %s", describe_eps(drop_eps(p.dtype)).c_str(),
                no_correction_ ? "off" : "of dE and dC");
  lines.push_back(buf);
  if (stats_.pairs > 0) {
    std::snprintf(buf, sizeof buf, "kept tiles   %lld of %lld (%.2f%%) recomputed",
                  static_cast<long long>(stats_.kept_pairs), static_cast<long long>(stats_.pairs),
                  100.0 * static_cast<double>(stats_.kept_pairs) / static_cast<double>(stats_.pairs));
    lines.push_back(buf);
  }
  return lines;
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<DropBeforeRecomputeStage>(); }

}  // namespace cce::s08
