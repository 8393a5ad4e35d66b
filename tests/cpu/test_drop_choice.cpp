// The drop stages' host-side choices, without a GPU: stage 10's automatic
// eps's pick from the measured masses (the default budget, the boundary, the
// fallback) and the settings its flags give; stage 09's plan sizes (where the
// dC tail sums live).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/options.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

// dropped[k]: the mass per row dropped at eps = 2^-(8 + k), falling as eps does.
void fill(double (&dropped)[kAutoExponents], std::vector<double> values) {
  for (int k = 0; k < kAutoExponents; ++k) dropped[k] = values.at(static_cast<size_t>(k));
}

TEST(DropChoice, LargestEpsWithinTheBudgetInclusive) {
  double dropped[kAutoExponents];
  fill(dropped, {0.2, 0.1, 0.05, 0.03, 0.025, 0.01, 0.005, 0.001, 0.0});
  EXPECT_EQ(choose_drop_exponent(dropped, 0.025), 12);  // 0.025 ≤ 0.025: 2^-12
  EXPECT_EQ(choose_drop_exponent(dropped, 0.0249), 13);
  EXPECT_EQ(choose_drop_exponent(dropped, 0.2), 8);  // the first candidate already within
  EXPECT_EQ(choose_drop_exponent(dropped, 0.03), 11);
}

TEST(DropChoice, NoCandidateWithinTheBudgetFallsBackToTheSmallestEps) {
  double dropped[kAutoExponents];
  fill(dropped, {0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1});
  EXPECT_EQ(choose_drop_exponent(dropped, 0.025), kAutoLastExponent);
  EXPECT_EQ(kAutoLastExponent, 16);
  EXPECT_EQ(kAutoFirstExponent, 8);
}

DropSettings settings_from(std::vector<const char*> flags, Dtype dtype) {
  PlanPerBatchStage stage;
  OptionParser parser("stage10");
  stage.add_options(parser);
  flags.insert(flags.begin(), "stage10");
  EXPECT_TRUE(parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data())));
  stage.validate_options();
  return stage.settings(dtype);
}

TEST(DropChoice, TheFlagsSettings) {
  const DropSettings bf16 = settings_from({}, Dtype::kBFloat16);
  EXPECT_EQ(bf16.dropped_mass, 0.025) << "bf16's default: the automatic eps within 0.025";
  EXPECT_EQ(bf16.dropped_mass, kDefaultDroppedMass);
  EXPECT_EQ(bf16.eps, std::ldexp(1.0f, -kAutoFirstExponent));
  EXPECT_TRUE(bf16.correct_tail && bf16.correct_dc && bf16.group_tokens);
  const DropSettings fp32 = settings_from({}, Dtype::kFloat32);
  EXPECT_EQ(fp32.dropped_mass, 0.0) << "fp32 keeps a fixed eps";
  EXPECT_EQ(fp32.eps, s08::default_drop_eps(Dtype::kFloat32));
  EXPECT_EQ(settings_from({"--dropped-mass", "0.01"}, Dtype::kBFloat16).dropped_mass, 0.01);
  const DropSettings fixed = settings_from({"--drop-eps", "0.001"}, Dtype::kBFloat16);
  EXPECT_EQ(fixed.dropped_mass, 0.0);
  EXPECT_EQ(fixed.eps, 0.001f);
  EXPECT_EQ(settings_from({"--keep-all"}, Dtype::kBFloat16).eps, 0.0f);
  EXPECT_FALSE(settings_from({"--no-correction"}, Dtype::kBFloat16).correct_tail);
  EXPECT_FALSE(settings_from({"--no-dc-correction"}, Dtype::kBFloat16).correct_dc);
  EXPECT_FALSE(settings_from({"--no-token-grouping"}, Dtype::kBFloat16).group_tokens);
}

Problem problem(int64_t n, int64_t d, int64_t v, Dtype dtype) {
  Problem p;
  p.n = n, p.d = d, p.v = v, p.dtype = dtype;
  return p;
}

TEST(DropChoice, PlanSizes) {
  const DropPlan plan = plan_drop(problem(300, 128, 16411, Dtype::kBFloat16));
  EXPECT_EQ(plan.tile_rows, 128);
  EXPECT_EQ(plan.tile_cols, 128);
  EXPECT_EQ(plan.tiles, 129);  // ⌈16411 / 128⌉
  EXPECT_EQ(plan.token_blocks, 3);
  EXPECT_EQ(plan.slot_bytes, 128 * 128 * 2);
  EXPECT_GE(plan.slot_capacity, plan.token_blocks) << "a chunk must hold one tile's blocks";
  EXPECT_EQ(plan.chunk_slots(), plan.slot_capacity + plan.spill_slot_capacity + plan.stats_slot_capacity);
  const DropPlan fp32 = plan_drop(problem(300, 128, 1129, Dtype::kFloat32));
  EXPECT_EQ(fp32.tile_cols, 64);
  EXPECT_EQ(fp32.tiles, 18);
  EXPECT_EQ(fp32.spill_slot_capacity, 0) << "fp32 writes dE in place: no spill";
  // --chunk-rows and --slot-mb as given.
  const DropPlan small = plan_drop(problem(1100, 192, 30011, Dtype::kBFloat16), 4096, size_t{1} << 20);
  EXPECT_EQ(small.chunk_rows, 4096);
  EXPECT_EQ(small.slot_capacity, 32);
}

// dC's tail sums share the statistics rows only where M (bf16) leaves half a
// row free and they fit there: bf16, N even, 4D ≤ 2N.
TEST(DropChoice, TailSumsInTheStatisticsRowsOnlyWhereTheyFit) {
  EXPECT_TRUE(plan_drop(problem(300, 128, 5000, Dtype::kBFloat16)).tail_sums_in_stats);
  EXPECT_FALSE(plan_drop(problem(301, 128, 5000, Dtype::kBFloat16)).tail_sums_in_stats);
  EXPECT_FALSE(plan_drop(problem(300, 151, 5000, Dtype::kBFloat16)).tail_sums_in_stats);
  EXPECT_FALSE(plan_drop(problem(300, 128, 5000, Dtype::kFloat32)).tail_sums_in_stats)
      << "fp32's M takes the whole row";
}

}  // namespace
}  // namespace cce::s10
