#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"

#include <cstdio>

#include "common/check.h"
#include "common/tile/launch.cuh"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/split_lse.cuh"

namespace cce::s03 {
namespace {

// One thread per row: merge the ranges' states into the LSE; loss = LSE − z_t.
__global__ void merge_ranges_kernel(const float2* __restrict__ partial, const float* __restrict__ target_logit,
                                    const int64_t* __restrict__ targets, int64_t n, int64_t ranges,
                                    int64_t ignore_index, float* __restrict__ lse, float* __restrict__ loss_per_token) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= n) return;
  OnlineSoftmax state;
  for (int64_t r = 0; r < ranges; ++r) {
    const float2 pair = partial[r * n + row];
    state.merge(OnlineSoftmax{pair.x, pair.y});
  }
  const float row_lse = state.lse();
  lse[row] = row_lse;
  if (loss_per_token != nullptr)
    loss_per_token[row] = targets[row] == ignore_index ? 0.0f : row_lse - target_logit[row];
}

}  // namespace

FusedPlan plan_fused(const Problem& p, int64_t requested_ranges) {
  FusedPlan plan;
  plan.path = choose_forward_path(p);
  UnitPolicy policy;
  policy.ranges = requested_ranges;
  policy.fill_wave = true;
  policy.blocks_per_sm = resident_blocks_per_sm<SplitLseEpilogue>(plan.path);
  policy.max_ranges = 64;  // the partials take ranges·N·8 bytes
  plan.units = plan_tile_units(p, plan.path, policy);
  return plan;
}

std::vector<MemoryItem> fused_lse_scratch(const Problem& p, const FusedPlan& plan, bool with_loss) {
  std::vector<MemoryItem> items = {
      {"range (max, sum) S*N", static_cast<size_t>(plan.units.ranges * p.n) * sizeof(float2)}};
  if (with_loss) items.push_back({"target logit", static_cast<size_t>(p.n) * sizeof(float)});
  return items;
}

SplitLseParams split_lse_params(const DeviceInputs& in, const Scratch& scratch, bool with_loss) {
  const Problem& p = in.problem;
  return SplitLseParams{in.targets.get(), p.n, p.v, p.softcap, scratch.get<float2>("range (max, sum) S*N"),
                        with_loss ? scratch.get<float>("target logit") : nullptr};
}

void merge_ranges(const DeviceInputs& in, const FusedPlan& plan, const SplitLseParams& params, float* lse,
                  float* loss_per_token, cudaStream_t stream) {
  const Problem& p = in.problem;
  constexpr int kThreads = 256;
  merge_ranges_kernel<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      params.partial, params.target_logit, in.targets.get(), p.n, plan.units.ranges, p.ignore_index, lse,
      loss_per_token);
  CCE_CHECK_LAUNCH();
}

void fused_lse(const DeviceInputs& in, const FusedPlan& plan, const Scratch& scratch, float* lse,
               float* loss_per_token, cudaStream_t stream) {
  const SplitLseParams params = split_lse_params(in, scratch, loss_per_token != nullptr);
  launch_tile_units<SplitLseEpilogue>(in, plan.path, plan.units, params, stream);
  merge_ranges(in, plan, params, lse, loss_per_token, stream);
}

std::string describe_plan(const FusedPlan& plan) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%lld token blocks x %lld vocabulary ranges of %lld tiles on %lld blocks; %s",
                static_cast<long long>(plan.units.token_blocks), static_cast<long long>(plan.units.ranges),
                static_cast<long long>(plan.units.tiles_per_range), static_cast<long long>(plan.units.grid),
                to_string(plan.path));
  return buf;
}

void FusedGemmCeStage::add_options(OptionParser& parser) {
  parser.add_int("vocab-splits", &requested_ranges_,
                 "vocabulary ranges per token block: 0 = the tile engine's choice, 1 = plain 1D grid");
}

void FusedGemmCeStage::validate_options() const {
  if (requested_ranges_ < 0) throw InputError("--vocab-splits must be >= 0");
}

std::vector<MemoryItem> FusedGemmCeStage::workspace(const Problem& p, bool) const {
  return concat(fused_lse_scratch(p, plan_fused(p, requested_ranges_), true), per_token_loss_scratch(p));
}

void FusedGemmCeStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  plan_ = plan_fused(p, requested_ranges_);
  scratch_.allocate(workspace(p, false));
  float* per_token = per_token_loss_buffer(p, loss, scratch_);
  fused_lse(in, plan_, scratch_, lse, per_token, stream);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

std::vector<std::string> FusedGemmCeStage::report_lines() const { return {"grid         " + describe_plan(plan_)}; }

std::unique_ptr<Stage> make_stage() { return std::make_unique<FusedGemmCeStage>(); }

}  // namespace cce::s03
