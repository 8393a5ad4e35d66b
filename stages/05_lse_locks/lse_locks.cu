#include "stages/05_lse_locks/lse_locks.h"

#include <cstdio>

#include "common/check.h"
#include "common/tile/launch.cuh"
#include "common/token_reduction.h"
#include "stages/04_indexed_dot/indexed_dot.h"
#include "stages/05_lse_locks/locked_lse.cuh"

namespace cce::s05 {
namespace {

__global__ void fill_kernel(float* __restrict__ x, int64_t n, float value) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}

}  // namespace

s03::FusedPlan plan_locked(const Problem& p) {
  s03::FusedPlan plan;
  plan.path = choose_forward_path(p);
  UnitPolicy policy;
  if (plan.path != TilePath::kWgmmaPipeline) {
    policy.token_group = kGroupTokenBlocks;  // one tile per unit, groups of 8 token blocks
  } else {
    // Units of many tiles: the blocks of one token block finish their units
    // together, and each merge waits for the lock; fewer merges, less waiting.
    policy.max_ranges = kMaxPipelineRanges;
  }
  plan.units = plan_tile_units(p, plan.path, policy);
  return plan;
}

int64_t lock_count(const s03::FusedPlan& plan) {
  const int64_t rows = tile_shape(plan.path).bm;
  const int64_t team_rows = plan.path == TilePath::kWgmmaPipeline ? rows / 2 : rows;  // a warpgroup's rows
  return plan.units.token_blocks * (rows / team_rows);
}

std::vector<MemoryItem> locked_lse_scratch(const Problem&, const s03::FusedPlan& plan) {
  return {{"locks", static_cast<size_t>(lock_count(plan)) * sizeof(int)}};
}

void prepare_locked_lse(const Problem& p, const s03::FusedPlan& plan, const Scratch& scratch, float* lse,
                        cudaStream_t stream) {
  constexpr int kThreads = 256;
  fill_kernel<<<static_cast<unsigned>((p.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(lse, p.n, -INFINITY);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaMemsetAsync(scratch.get<int>("locks"), 0, lock_count(plan) * sizeof(int), stream));
}

void locked_lse(const DeviceInputs& in, const s03::FusedPlan& plan, const Scratch& scratch, float* lse,
                cudaStream_t stream) {
  const Problem& p = in.problem;
  prepare_locked_lse(p, plan, scratch, lse, stream);
  LockedLseParams params{p.n, p.v, p.softcap, lse, scratch.get<int>("locks")};
  launch_tile_units<LockedLseEpilogue>(in, plan.path, plan.units, params, stream);
}

std::vector<MemoryItem> forward_scratch(const Problem& p) {
  return concat(concat(locked_lse_scratch(p, plan_locked(p)), s04::dot_scratch(p)), per_token_loss_scratch(p));
}

void finish_forward(const DeviceInputs& in, const Scratch& scratch, float* loss, const float* lse,
                    cudaStream_t stream) {
  const Problem& p = in.problem;
  float* dot = scratch.get<float>("target dot");
  s04::indexed_dot(in, s04::DotVariant::k2d, dot, stream);
  float* per_token = per_token_loss_buffer(p, loss, scratch);
  s04::finalize_token_loss(p, in.targets.get(), lse, dot, per_token, stream);
  finish_loss(p, per_token, in.targets.get(), loss, stream);
}

void forward(const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  scratch.allocate(forward_scratch(p));
  locked_lse(in, plan_locked(p), scratch, lse, stream);
  finish_forward(in, scratch, loss, lse, stream);
}

std::vector<std::string> report_locked_plan(const Problem& p) {
  const s03::FusedPlan plan = plan_locked(p);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "grid         %lld token blocks x %lld vocabulary tiles in units of %lld tiles, groups of %lld token "
                "blocks, on %lld blocks; %s",
                static_cast<long long>(plan.units.token_blocks), static_cast<long long>(plan.units.vocab_tiles),
                static_cast<long long>(plan.units.tiles_per_range), static_cast<long long>(plan.units.token_group),
                static_cast<long long>(plan.units.grid), to_string(plan.path));
  return {buf};
}

std::unique_ptr<Stage> make_stage() {
  return make_stage_from({"05_lse_locks",
                          "2D grid (token blocks x vocabulary blocks), partial LSEs merged under a per-token-block lock",
                          [](const Problem& p, bool) { return forward_scratch(p); }, forward, nullptr,
                          report_locked_plan});
}

}  // namespace cce::s05
