// Stage 08's own properties (the stage table's tests cover the reference
// checks, the memory model and the bitwise run-twice on small shapes):
//   - the kept list is the brute-force one: no dropped tile holds a softmax
//     entry ≥ eps, and every kept tile holds one up to the rounding of the
//     stored tile max (bf16, rounded up: at most 2^-7·|m| in the logit);
//   - the automatic eps is the largest candidate whose brute-force dropped
//     mass is within the budget, and decides as that eps given by hand;
//   - without token grouping the rows keep their order and the kept list
//     and the outputs stay right;
//   - bitwise equal over two runs at a shape with several chunks;
//   - dropping without correction moves dE and dC by at most stage 07's bound
//     (each dropped S_ij is below g_i·eps), and the tail correction makes dE
//     closer to the fp64 reference than dropping alone;
//   - every token with the same target (all of dC's target terms on one row);
//   - S tiles spilled into the rows of the dead tile statistics come back
//     right (several chunks, each using those slots, against fp64).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/compare.h"
#include "common/reference.h"
#include "common/runner.h"
#include "tests/gpu/skip_without_gpu.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"

namespace cce {
namespace {

struct Stage08Run {
  HostOutputs out;
  s08::DropStats stats;
  std::vector<uint8_t> flags;
  std::vector<int> order;
  std::vector<int> token_order;  // token block b holds rows token_order[128b .. 128b + 127]
};

Stage08Run run_stage08(const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                std::vector<const char*> flags) {
  s08::DropBeforeRecomputeStage stage;
  OptionParser parser("stage08");
  stage.add_options(parser);
  flags.insert(flags.begin(), "stage08");
  if (!parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data()))) ADD_FAILURE();
  stage.validate_options();
  StageRunner runner(stage, p, in, upstream);
  runner.poison_outputs();
  runner.forward_backward();
  Stage08Run run;
  run.out = runner.download();
  run.stats = stage.stats();
  run.flags = stage.kept_flags();
  run.order = stage.vocabulary_order();
  run.token_order = stage.token_order();
  return run;
}

Problem bf16_problem(int64_t n, int64_t d, int64_t v) {
  Problem p;
  p.n = n;
  p.d = d;
  p.v = v;
  p.dtype = Dtype::kBFloat16;
  return p;
}

// Each (tile, token block) pair's brute-force view, in double from the
// inputs: over the block's rows with a gradient, the largest log p in the
// tile, that plus the slack the stored bf16 max allows (2^-7·|m|), and the
// tile's softmax mass without the targets' own entries.
struct PairView {
  double largest_log_p = -INFINITY, best_margin = -INFINITY, mass = 0.0;
  double stored_log_p = -INFINITY;  // with the max as the statistics store it (fp32, rounded up to bf16)
};
// The statistics' max: rounded up to bf16 (toward +inf).
double bf16_round_up(double m) {
  const float f = static_cast<float>(m);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0xffffu) != 0) bits = f > 0.0f ? (bits & 0xffff0000u) + 0x10000u : bits & 0xffff0000u;
  float rounded = 0.0f;
  std::memcpy(&rounded, &bits, 4);
  return rounded;
}
struct BruteForce {
  int64_t tiles = 0, blocks = 0, rows = 0;  // rows: with a gradient
  std::vector<PairView> pairs;              // [tiles][blocks]
  // Mean dropped mass per row with a gradient at eps: the pairs the stage
  // drops, decided as it does on the stored max (a pair whose true largest
  // entry is just below eps may be kept: its stored max is rounded up).
  double dropped_mass(double eps) const {
    double sum = 0.0;
    for (const PairView& v : pairs) sum += v.stored_log_p < std::log(static_cast<float>(eps)) ? v.mass : 0.0;
    return sum / static_cast<double>(rows);
  }
};
BruteForce brute_force(const Problem& p, const HostInputs& in, const Stage08Run& run) {
  BruteForce bf;
  const int64_t bm = 128, bn = 128;
  bf.tiles = (p.v + bn - 1) / bn, bf.blocks = (p.n + bm - 1) / bm;
  bf.pairs.assign(static_cast<size_t>(bf.tiles * bf.blocks), PairView{});
  std::vector<double> z(static_cast<size_t>(p.v));
  std::vector<int64_t> block_of(static_cast<size_t>(p.n), -1);
  for (int64_t place = 0; place < p.n; ++place) block_of[run.token_order[place]] = place / bm;
  for (int64_t i = 0; i < p.n; ++i) {
    EXPECT_GE(block_of[i], 0) << "row " << i << " is in no token block";
    if (in.targets[i] == p.ignore_index) continue;
    ++bf.rows;
    for (int64_t pos = 0; pos < p.v; ++pos) {
      const int64_t j = run.order[pos];
      double sum = 0.0;
      for (int64_t k = 0; k < p.d; ++k) sum += static_cast<double>(in.e[i * p.d + k]) * in.c[j * p.d + k];
      z[pos] = sum;
    }
    for (int64_t t = 0; t < bf.tiles; ++t) {
      PairView& v = bf.pairs[t * bf.blocks + block_of[i]];
      double m = -INFINITY, mass = 0.0;
      for (int64_t pos = t * bn; pos < std::min(p.v, (t + 1) * bn); ++pos) {
        m = std::max(m, z[pos]);
        if (run.order[pos] != in.targets[i]) mass += std::exp(z[pos] - run.out.lse[i]);
      }
      const double log_p = m - run.out.lse[i];
      v.largest_log_p = std::max(v.largest_log_p, log_p);
      v.stored_log_p = std::max(v.stored_log_p, bf16_round_up(m) - static_cast<double>(run.out.lse[i]));
      v.best_margin = std::max(v.best_margin, log_p + std::ldexp(std::fabs(m), -7));
      v.mass += mass;
    }
  }
  return bf;
}

std::string exact_text(double x) {  // a flag value that reads back as x
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

// The run's kept list against the brute-force one at eps.
void expect_brute_force_kept_list(const BruteForce& bf, const Stage08Run& run, double eps) {
  ASSERT_EQ(run.flags.size(), static_cast<size_t>(bf.tiles * bf.blocks));
  int64_t kept = 0;
  for (int64_t t = 0; t < bf.tiles; ++t)
    for (int64_t b = 0; b < bf.blocks; ++b) {
      const PairView& v = bf.pairs[t * bf.blocks + b];
      const bool is_kept = run.flags[t * bf.blocks + b] != 0;
      kept += is_kept;
      if (is_kept)
        EXPECT_GE(v.best_margin + 1e-3, std::log(eps)) << "tile " << t << " block " << b << " kept with nothing near eps";
      else
        EXPECT_LT(v.largest_log_p, std::log(eps) + 1e-3) << "tile " << t << " block " << b << " dropped with an entry >= eps";
    }
  EXPECT_EQ(kept, run.stats.kept_tiles);
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, bf.tiles * bf.blocks) << "nothing dropped: the test would prove nothing";
}

// The outputs pass the Eigen reference check at the tolerance of stage 08
// with eps > 0 (every element: the shapes here are small).
void expect_reference_check(const Problem& p, const HostInputs& in, const HostOutputs& out,
                            const std::vector<float>& upstream, const char* what) {
  const CheckReport report = check_outputs(p, in, out, upstream, true, int64_t{1} << 26, 8,
                                           s08::DropBeforeRecomputeStage().gradient_tolerance_scale());
  for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << what << ": " << cmp.summary();
}

// The decision tests' inputs: N = 300 (3 token blocks, the last partial), 10% ignored.
HostInputs decision_inputs(const Problem& p, uint64_t seed) {
  GeneratorOptions gen;
  gen.seed = seed;
  gen.ignore_fraction = 0.1;
  return generate_inputs(p, gen);
}

TEST(DropBeforeRecompute, KeptListIsTheBruteForceOne) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = decision_inputs(p, 81);
  const Stage08Run run = run_stage08(p, in, default_upstream(p, 3), {"--drop-eps", "0.00390625"});
  EXPECT_EQ(run.stats.choice.eps, 0.00390625f);
  expect_brute_force_kept_list(brute_force(p, in, run), run, std::ldexp(1.0, -8));
}

// --no-token-grouping: token blocks are the rows in their order, the kept
// list is still the brute-force one, and both ways pass the reference check.
TEST(DropBeforeRecompute, WithoutTokenGroupingRowsStayInOrder) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = decision_inputs(p, 83);
  const std::vector<float> upstream = default_upstream(p, 3);
  const Stage08Run grouped = run_stage08(p, in, upstream, {"--drop-eps", "0.00390625"});
  const Stage08Run ungrouped = run_stage08(p, in, upstream, {"--drop-eps", "0.00390625", "--no-token-grouping"});
  std::vector<int> identity(static_cast<size_t>(p.n));
  for (int64_t i = 0; i < p.n; ++i) identity[i] = static_cast<int>(i);
  EXPECT_EQ(ungrouped.token_order, identity);
  EXPECT_NE(grouped.token_order, identity) << "grouping left the rows in order: the test compares nothing";
  expect_brute_force_kept_list(brute_force(p, in, ungrouped), ungrouped, std::ldexp(1.0, -8));
  expect_reference_check(p, in, grouped.out, upstream, "grouped");
  expect_reference_check(p, in, ungrouped.out, upstream, "ungrouped");
}

// The automatic eps is the largest of 2^-8 … 2^-16 whose brute-force dropped
// mass is within the budget; it decides exactly as that eps given by hand.
TEST(DropBeforeRecompute, AutomaticEpsIsTheLargestWithinTheBudget) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = decision_inputs(p, 82);
  const std::vector<float> upstream = default_upstream(p, 3);
  const Stage08Run fixed8 = run_stage08(p, in, upstream, {"--drop-eps", "0.00390625"});
  const BruteForce bf = brute_force(p, in, fixed8);  // the order and LSE do not depend on eps
  // A budget between the masses at two neighbouring exponents, 10% from each
  // (the statistics' bf16 rounding moves a mass by much less).
  int expected = 0;
  double budget = 0.0;
  for (int e = s08::kAutoFirstExponent + 1; e <= s08::kAutoLastExponent && expected == 0; ++e) {
    const double above = bf.dropped_mass(std::ldexp(1.0, -(e - 1))), at = bf.dropped_mass(std::ldexp(1.0, -e));
    if (at > 0.0 && above > 1.21 * at) expected = e, budget = std::sqrt(above * at);
  }
  ASSERT_NE(expected, 0) << "no two neighbouring exponents drop clearly different masses";
  const std::string budget_text = exact_text(budget);
  const Stage08Run automatic = run_stage08(p, in, upstream, {"--dropped-mass", budget_text.c_str()});
  const double eps = std::ldexp(1.0, -expected);
  std::printf("budget %.4g: expected eps 2^-%d (dropped mass %.4g), got %g (dropped %.4g)\n", budget, expected,
              bf.dropped_mass(eps), automatic.stats.choice.eps, automatic.stats.choice.dropped_mass);
  EXPECT_EQ(automatic.stats.choice.eps, static_cast<float>(eps));
  EXPECT_NEAR(automatic.stats.choice.dropped_mass, bf.dropped_mass(eps), 0.02 * bf.dropped_mass(eps));
  expect_brute_force_kept_list(bf, automatic, eps);
  const std::string eps_text = exact_text(eps);
  const Stage08Run by_hand = run_stage08(p, in, upstream, {"--drop-eps", eps_text.c_str()});
  EXPECT_TRUE(by_hand.out.de == automatic.out.de && by_hand.out.dc == automatic.out.dc)
      << "the automatic eps and the same eps given by hand differ";
  EXPECT_LT(by_hand.stats.choice.dropped_mass, 0.0) << "a fixed eps measures no mass";
}

TEST(DropBeforeRecompute, BitwiseEqualOverTwoRunsWithSeveralChunks) {
  SKIP_WITHOUT_GPU();
  Problem p = bf16_problem(1100, 192, 30011);
  p.softcap = 30.0f;
  GeneratorOptions gen;
  gen.seed = 5;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 4);
  // 24 MiB of slots (the least the default rule gives): several chunks at this shape.
  const Stage08Run a = run_stage08(p, in, upstream, {"--drop-eps", "1e-9", "--slot-mb", "24"});
  const Stage08Run b = run_stage08(p, in, upstream, {"--drop-eps", "1e-9", "--slot-mb", "24"});
  EXPECT_GT(a.stats.chunks, 1) << "one chunk: the order across chunks is not exercised";
  EXPECT_EQ(a.out.loss, b.out.loss);
  EXPECT_EQ(a.out.lse, b.out.lse);
  EXPECT_TRUE(a.out.de == b.out.de) << "dE differs between two runs";
  EXPECT_TRUE(a.out.dc == b.out.dc) << "dC differs between two runs";
}

double rel_l2(const std::vector<float>& x, const std::vector<double>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - ref[i]) * (x[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

TEST(DropBeforeRecompute, SlotsInTheStatisticsRowsHoldTheirTiles) {
  SKIP_WITHOUT_GPU();
  // N = 16384: a statistics row (4N bytes) has room for one S tile (32 KB)
  // beside the dC tail sums, 100 rows (V = 12800) beside the 800 slots of
  // the work buffer and the dE output: a chunk of 7 whole tiles (896 S
  // tiles) reaches into the statistics.
  const Problem p = bf16_problem(16384, 32, 12800);
  const s08::DropPlan plan = s08::plan_drop(p, 0, size_t{24} << 20);  // as --slot-mb 24
  ASSERT_GT(plan.stats_slot_capacity, 0) << "this shape should spill S tiles into the statistics";
  GeneratorOptions gen;
  gen.seed = 21;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 1);
  const Stage08Run run = run_stage08(p, in, upstream, {"--drop-eps", "1e-9", "--slot-mb", "24"});
  // The chunks as the stage cuts them (consecutive tiles within the slots):
  // at least one must use slots past the work buffer's and the dE output's.
  int64_t most = 0;
  for (int64_t first = 0; first < plan.tiles;) {
    int64_t count = 0, last = first;
    auto kept_in = [&](int64_t t) {
      return std::count(run.flags.begin() + t * plan.token_blocks, run.flags.begin() + (t + 1) * plan.token_blocks, 1);
    };
    do count += kept_in(last++);
    while (last < plan.tiles && count + kept_in(last) <= plan.chunk_slots());
    most = std::max(most, count);
    first = last;
  }
  ASSERT_GT(most, plan.slot_capacity + plan.spill_slot_capacity) << "the statistics' slots went unused";
  ReferenceOptions opt;
  opt.backward = true;
  opt.upstream = upstream;
  const ReferenceResult ref = reference_cross_entropy(p, in, opt);
  const double err_de = rel_l2(run.out.de, ref.de), err_dc = rel_l2(run.out.dc, ref.dc);
  std::printf("dE, dC rel L2 vs fp64: %.3e, %.3e (%lld of %lld tiles kept, %lld chunks of at most %lld S tiles, %lld in the statistics)\n",
              err_de, err_dc, static_cast<long long>(run.stats.kept_tiles), static_cast<long long>(run.stats.tiles),
              static_cast<long long>(run.stats.chunks), static_cast<long long>(plan.chunk_slots()),
              static_cast<long long>(plan.stats_slot_capacity));
  EXPECT_LT(err_de, 1e-2);
  EXPECT_LT(err_dc, 1e-2);
}

TEST(DropBeforeRecompute, DroppingStaysWithinTheBoundAndTheCorrectionHelps) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(256, 128, 16411);
  GeneratorOptions gen;
  gen.seed = 12;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 1);  // mean: every g_i = 1/#valid
  const double eps = std::ldexp(1.0, -8);
  const Stage08Run exact = run_stage08(p, in, upstream, {"--keep-all"});
  const Stage08Run dropped = run_stage08(p, in, upstream, {"--drop-eps", "0.00390625", "--no-correction"});
  const Stage08Run corrected = run_stage08(p, in, upstream, {"--drop-eps", "0.00390625"});
  EXPECT_LT(dropped.stats.kept_tiles, dropped.stats.tiles);

  // Stage 07's bound on what dropping changes (plus the outputs' bf16 rounding).
  const double g = 1.0 / static_cast<double>(count_valid_targets(p, in.targets));
  std::vector<double> c_abs(p.d, 0.0), e_abs(p.d, 0.0);
  for (int64_t j = 0; j < p.v; ++j)
    for (int64_t k = 0; k < p.d; ++k) c_abs[k] += std::fabs(in.c[j * p.d + k]);
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t k = 0; k < p.d; ++k) e_abs[k] += g * std::fabs(in.e[i * p.d + k]);
  auto within = [&](const std::vector<float>& a, const std::vector<float>& b, const std::vector<double>& bound_k,
                    double scale, const char* what) {
    for (size_t x = 0; x < a.size(); ++x) {
      const double bound = scale * bound_k[x % p.d] + std::ldexp(1.0, -7) * std::max(std::fabs(a[x]), std::fabs(b[x])) + 1e-9;
      ASSERT_LE(std::fabs(static_cast<double>(a[x]) - b[x]), bound) << what << "[" << x / p.d << "," << x % p.d << "]";
    }
  };
  within(dropped.out.de, exact.out.de, c_abs, g * eps, "dE");
  within(dropped.out.dc, exact.out.dc, e_abs, eps, "dC");

  ReferenceOptions opt;
  opt.backward = true;
  opt.upstream = upstream;
  const ReferenceResult ref = reference_cross_entropy(p, in, opt);
  const double err_exact = rel_l2(exact.out.de, ref.de), err_dropped = rel_l2(dropped.out.de, ref.de),
               err_corrected = rel_l2(corrected.out.de, ref.de);
  std::printf("dE rel L2 vs fp64: every tile %.3e, dropped %.3e, dropped + corrected %.3e (%lld of %lld tiles kept)\n",
              err_exact, err_dropped, err_corrected, static_cast<long long>(corrected.stats.kept_tiles),
              static_cast<long long>(corrected.stats.tiles));
  std::printf("dC rel L2 vs fp64: every tile %.3e, dropped %.3e\n", rel_l2(exact.out.dc, ref.dc),
              rel_l2(dropped.out.dc, ref.dc));
  EXPECT_LT(err_corrected, err_dropped);
  EXPECT_LT(err_exact, 1e-2);
}

TEST(DropBeforeRecompute, EveryTokenWithTheSameTarget) {
  SKIP_WITHOUT_GPU();
  Problem p = bf16_problem(300, 96, 5003);
  p.reduction = Reduction::kSum;
  GeneratorOptions gen;
  gen.seed = 3;
  HostInputs in = generate_inputs(p, gen);
  std::fill(in.targets.begin(), in.targets.end(), 4001);
  const std::vector<float> upstream = default_upstream(p, 2);
  expect_reference_check(p, in, run_stage08(p, in, upstream, {}).out, upstream, "same target");
}

}  // namespace
}  // namespace cce
