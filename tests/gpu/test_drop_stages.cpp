// The drop stages' own properties, each on the path it names (the stage
// table's tests cover the reference checks, the memory model and the
// run-twice on small shapes). DropBeforeRecompute.* run stage 08 and
// PlanPerBatch.* stage 10, which keeps stage 08's decision and correction:
//   - the kept list is the brute-force one: no dropped tile holds a softmax
//     entry ≥ eps, and every kept tile holds one up to the rounding of the
//     stored tile max (bf16, rounded up: at most 2^-7·|m| in the logit);
//   - the vocabulary's order falls with the average logit C_j·ΣE, up to the
//     16 bits its sort keeps;
//   - the automatic eps is the largest candidate whose brute-force misplaced
//     mass is within the budget (the default budget too), decides as that eps
//     given by hand, and falls back to 2^-17 when no candidate is within it;
//   - token grouping orders the rows by how many tiles they need (in powers
//     of two), then by the rarest tile they need, then the count; with the
//     automatic eps once more near the eps the first grouping chooses; without it
//     the rows keep their order, and the kept list and outputs stay right;
//   - bitwise equal over two runs at the automatic eps, with tiles and
//     targets dropped, several backward and forward chunks, the tail sums in
//     the statistics rows;
//   - the tail correction is the algorithm's: dE and dC match a double model
//     of "kept tiles exact, dropped tiles' mass spread over their tile,
//     dropped targets exact" within the arithmetic's bound, and dropping
//     without it (or with half of it) does not;
//   - dropping without correction moves dE and dC by at most stage 07's bound;
//   - softcap and ignored tokens with tiles dropped pass the reference check;
//   - every token with the same target (all of dC's target terms on one row);
//   - S tiles spilled into the rows of the dead tile statistics come back
//     right (several chunks, each using those slots).
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/compare.h"
#include "common/reference.h"
#include "common/runner.h"
#include "tests/gpu/skip_without_gpu.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/09_deterministic_products/deterministic_products.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce {
namespace {

// Which stage a run is of.
enum class Which { kStage08, kStage09, kStage10 };

struct RunStats {
  int64_t tiles = 0, kept_tiles = 0;  // (token block, tile) pairs
  int64_t chunks = 1;                 // the backward's chunks (stages 09, 10)
  s10::EpsChoice choice;              // the eps decided with (stage 10: and what the automatic eps measured)
  s10::PlanChoice plan;               // stage 10: the backward's plan and the kept share it was chosen from
};

struct DropRun {
  HostOutputs out;
  RunStats stats;
  std::vector<uint8_t> flags;
  std::vector<int> order;
  std::vector<int> token_order;  // token block b holds rows token_order[128b .. 128b + 127] (64 in fp32)
  GradientApproximation approximation;  // what the backward declares it left out
  std::vector<std::string> report;      // the stage's report lines after the run
};

// Whether the last run sorted the vocabulary (stage 10's dense plan before
// the forward runs no forward of stage 08's, so it has no order, no flags).
template <class S>
bool sorted_forward_ran(const S& stage) {
  if constexpr (std::is_same_v<S, s10::PlanPerBatchStage>) return !stage.plan_choice().before_forward;
  return true;
}

// How the loss and gradient are asked for: one call (Stage::loss_and_gradient,
// as the drivers do), or a forward and a backward (as autograd does).
enum class Calls { kTogether, kApart };

template <class S>
DropRun run_with(S& stage, const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                 std::vector<const char*> flags, Calls calls = Calls::kTogether) {
  OptionParser parser(stage.name());
  stage.add_options(parser);
  flags.insert(flags.begin(), "stage");
  if (!parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data()))) ADD_FAILURE();
  stage.validate_options();
  StageRunner runner(stage, p, in, upstream);
  runner.poison_outputs();
  if (calls == Calls::kTogether)
    runner.forward_backward();
  else
    runner.forward_then_backward();
  DropRun run;
  run.out = runner.download();
  if (sorted_forward_ran(stage)) run.order = stage.vocabulary_order();
  run.approximation = stage.gradient_approximation();
  run.report = stage.report_lines();
  return run;
}

// Stages 09 and 10: the run with the decision's statistics.
template <class S>
DropRun deterministic_run(S& stage, const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                          std::vector<const char*> flags, Calls calls) {
  DropRun run = run_with(stage, p, in, upstream, std::move(flags), calls);
  const s09::DropStats stats = stage.stats();
  run.stats.tiles = stats.tiles, run.stats.kept_tiles = stats.kept_tiles, run.stats.chunks = stats.chunks;
  run.stats.choice.eps = stats.eps;
  if (sorted_forward_ran(stage)) run.flags = stage.kept_flags();
  return run;
}

// A run of this stage 10 object: a second one is planned from the first (its
// history). The checks are of the sparse plan unless the flags name a plan.
DropRun run_stage10_on(s10::PlanPerBatchStage& stage, const Problem& p, const HostInputs& in,
                       const std::vector<float>& upstream, std::vector<const char*> flags,
                       Calls calls = Calls::kTogether) {
  const bool plan_named = std::any_of(flags.begin(), flags.end(),
                                      [](const char* f) { return std::strncmp(f, "--plan", 6) == 0; });
  if (!plan_named) flags.insert(flags.end(), {"--plan", "sparse"});
  DropRun run = deterministic_run(stage, p, in, upstream, std::move(flags), calls);
  run.stats.choice = stage.eps_choice();
  run.stats.plan = stage.plan_choice();
  if (sorted_forward_ran(stage)) run.token_order = stage.token_order();
  return run;
}

DropRun run_drop(Which which, const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                 std::vector<const char*> flags, Calls calls = Calls::kTogether) {
  auto identity = [&](DropRun& run) {
    run.token_order.resize(static_cast<size_t>(p.n));
    for (int64_t i = 0; i < p.n; ++i) run.token_order[i] = static_cast<int>(i);  // rows in their order
  };
  if (which == Which::kStage08) {
    s08::DropBeforeRecomputeStage stage;
    DropRun run = run_with(stage, p, in, upstream, std::move(flags));
    const s08::DropStats stats = stage.stats();
    run.stats.tiles = stats.pairs, run.stats.kept_tiles = stats.kept_pairs, run.stats.choice.eps = stats.eps;
    run.flags = stage.keep_flags();
    identity(run);
    return run;
  }
  if (which == Which::kStage09) {
    s09::DeterministicProductsStage stage;
    DropRun run = deterministic_run(stage, p, in, upstream, std::move(flags), calls);
    identity(run);
    return run;
  }
  s10::PlanPerBatchStage stage;
  return run_stage10_on(stage, p, in, upstream, std::move(flags), calls);
}
DropRun run_stage10(const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                    std::vector<const char*> flags, Calls calls = Calls::kTogether) {
  return run_drop(Which::kStage10, p, in, upstream, std::move(flags), calls);
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
// tile, that plus the slack the stored bf16 max allows (2^-7·|m|), the largest
// as stored, and the mass the tail correction misplaces.
struct PairView {
  double largest_log_p = -INFINITY, best_margin = -INFINITY;
  double stored_log_p = -INFINITY;  // with the max as the statistics store it (fp32, rounded up to bf16)
  // Σ over the rows of M·(1 − M/(|T|·p_max)), M the row's mass in the tile
  // without its target's entry (with it: misplaced_with_targets), p_max its
  // largest entry as stored.
  double misplaced = 0.0, misplaced_with_targets = 0.0;
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
  // Per row and tile [N][tiles]: the stored max's log p (−inf for ignored rows).
  std::vector<double> row_tile_log_p;
  // Whether it reaches log_threshold (1, else 0), −1 within 1e-4 of it (fp32 against double).
  std::vector<signed char> needs_at(double log_threshold) const {
    std::vector<signed char> needs(row_tile_log_p.size());
    for (size_t k = 0; k < needs.size(); ++k)
      needs[k] = std::fabs(row_tile_log_p[k] - log_threshold) < 1e-4 ? -1 : row_tile_log_p[k] >= log_threshold;
    return needs;
  }
  // Mean misplaced mass per row with a gradient at eps: over the pairs the
  // stage drops, decided as it does on the stored max (a pair whose true
  // largest entry is just below eps may be kept: its stored max is rounded up).
  double misplaced_mass(double eps, bool with_targets = false) const {
    double sum = 0.0;
    for (const PairView& v : pairs)
      sum += v.stored_log_p < std::log(static_cast<float>(eps)) ? (with_targets ? v.misplaced_with_targets : v.misplaced)
                                                                : 0.0;
    return sum / static_cast<double>(rows);
  }
};
BruteForce brute_force(const Problem& p, const HostInputs& in, const DropRun& run) {
  BruteForce bf;
  const int64_t bm = 128, bn = 128;
  bf.tiles = (p.v + bn - 1) / bn, bf.blocks = (p.n + bm - 1) / bm;
  bf.pairs.assign(static_cast<size_t>(bf.tiles * bf.blocks), PairView{});
  std::vector<double> z(static_cast<size_t>(p.v));
  std::vector<int64_t> block_of(static_cast<size_t>(p.n), -1);
  for (int64_t place = 0; place < p.n; ++place) block_of[run.token_order[place]] = place / bm;
  bf.row_tile_log_p.assign(static_cast<size_t>(p.n * bf.tiles), -INFINITY);
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
      double m = -INFINITY, mass = 0.0, target_mass = 0.0;
      for (int64_t pos = t * bn; pos < std::min(p.v, (t + 1) * bn); ++pos) {
        m = std::max(m, z[pos]);
        (run.order[pos] != in.targets[i] ? mass : target_mass) += std::exp(z[pos] - run.out.lse[i]);
      }
      const double log_p = m - run.out.lse[i];
      v.largest_log_p = std::max(v.largest_log_p, log_p);
      const double stored_log_p = bf16_round_up(m) - static_cast<double>(run.out.lse[i]);
      v.stored_log_p = std::max(v.stored_log_p, stored_log_p);
      const double width = static_cast<double>(std::min(p.v, (t + 1) * bn) - t * bn);
      const auto misplaced = [&](double row_mass) {
        return row_mass * std::max(0.0, 1.0 - row_mass / (width * std::exp(stored_log_p)));
      };
      v.misplaced += misplaced(mass);
      v.misplaced_with_targets += misplaced(mass + target_mass);
      bf.row_tile_log_p[i * bf.tiles + t] = stored_log_p;
      v.best_margin = std::max(v.best_margin, log_p + std::ldexp(std::fabs(m), -7));
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
void expect_brute_force_kept_list(const BruteForce& bf, const DropRun& run, double eps) {
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

// The outputs pass the Eigen reference check with what the run declares it
// left out (every element: the shapes here are small).
void expect_reference_check(const Problem& p, const HostInputs& in, const DropRun& run,
                            const std::vector<float>& upstream, const char* what) {
  EXPECT_GT(run.approximation.eps, 0.0) << what << ": the run declares nothing left out";
  const CheckReport report = check_outputs(p, in, run.out, upstream, true, int64_t{1} << 30, 8, run.approximation);
  EXPECT_EQ(report.note, "full check: every output element");
  for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << what << ": " << cmp.summary();
}

// Each row's token block in the run (rows of one block share its decisions).
std::vector<int64_t> token_block_of(const Problem& p, const DropRun& run) {
  const int64_t rows = s08::backward_tile(p.dtype);
  std::vector<int64_t> block(static_cast<size_t>(p.n), -1);
  for (int64_t place = 0; place < p.n; ++place) block[run.token_order[place]] = place / rows;
  return block;
}

// Rows with a gradient whose target falls in a tile dropped for their block
// (the exact target terms run for them).
int64_t dropped_targets(const Problem& p, const HostInputs& in, const DropRun& run) {
  const int64_t cols = s08::backward_tile(p.dtype), blocks = (p.n + cols - 1) / cols;
  std::vector<int64_t> position(static_cast<size_t>(p.v));
  for (int64_t pos = 0; pos < p.v; ++pos) position[run.order[pos]] = pos;
  const std::vector<int64_t> block = token_block_of(p, run);
  int64_t count = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    if (in.targets[i] == p.ignore_index) continue;
    count += run.flags[position[in.targets[i]] / cols * blocks + block[i]] == 0;
  }
  return count;
}

// Every k-th row with a gradient gets a target spread over the vocabulary
// (index 7919·i mod V): most such targets fall in tiles their block drops,
// where the stage adds their terms exactly.
void spread_some_targets(const Problem& p, HostInputs& in, int64_t every) {
  for (int64_t i = 0; i < p.n; i += every)
    if (in.targets[i] != p.ignore_index) in.targets[i] = (7919 * i) % p.v;
}

// Every k-th row with a gradient gets, as its target, the entry of largest
// softmax among the tiles `run` dropped for its block: a dropped target just
// below eps, where leaving it in a tile's mass (or out of its exact term)
// shows. The decisions do not depend on the targets (the statistics, LSE and
// sort key do not), so a run on the new targets drops the same tiles.
void targets_at_the_edge(const Problem& p, HostInputs& in, const DropRun& run, int64_t every) {
  const int64_t cols = s08::backward_tile(p.dtype), blocks = (p.n + cols - 1) / cols;
  const std::vector<int64_t> block = token_block_of(p, run);
  int64_t valid = 0;
  for (int64_t i = 0; i < p.n; ++i) {
    if (in.targets[i] == p.ignore_index || valid++ % every != 0) continue;
    double best = -INFINITY;
    int64_t best_j = -1;
    for (int64_t pos = 0; pos < p.v; ++pos) {
      if (run.flags[pos / cols * blocks + block[i]] != 0) continue;
      const int64_t j = run.order[pos];
      double z = 0.0;
      for (int64_t k = 0; k < p.d; ++k) z += double(in.e[i * p.d + k]) * in.c[j * p.d + k];
      if (z > best) best = z, best_j = j;
    }
    if (best_j >= 0) in.targets[i] = best_j;
  }
}

// Generated (realistic) inputs of the given seed.
HostInputs seeded_inputs(const Problem& p, uint64_t seed, double ignore_fraction = 0.0) {
  GeneratorOptions gen;
  gen.seed = seed;
  gen.ignore_fraction = ignore_fraction;
  return generate_inputs(p, gen);
}

// The decision tests' inputs: N = 300 (3 token blocks, the last partial), 10% ignored.
HostInputs decision_inputs(const Problem& p, uint64_t seed) { return seeded_inputs(p, seed, 0.1); }

void check_kept_list_is_the_brute_force_one(Which which) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = decision_inputs(p, 81);
  const DropRun run = run_drop(which, p, in, default_upstream(p, 3), {"--drop-eps", "0.00390625"});
  EXPECT_EQ(run.stats.choice.eps, 0.00390625f);
  expect_brute_force_kept_list(brute_force(p, in, run), run, std::ldexp(1.0, -8));
}
TEST(DropBeforeRecompute, KeptListIsTheBruteForceOne) { check_kept_list_is_the_brute_force_one(Which::kStage08); }
TEST(DeterministicProducts, KeptListIsTheBruteForceOne) { check_kept_list_is_the_brute_force_one(Which::kStage09); }
TEST(PlanPerBatch, KeptListIsTheBruteForceOne) { check_kept_list_is_the_brute_force_one(Which::kStage10); }

// The vocabulary's order is by the average logit, largest first: key_j = C_j · ΣE over the rows with a target,
// from the host in double, never rising along the order by more than the 16 bits the sort keeps (7 of mantissa)
// and the device's float sums allow.
TEST(DropBeforeRecompute, VocabularyOrderFallsWithTheAverageLogit) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 40009);
  const HostInputs in = decision_inputs(p, 82);
  const DropRun run = run_drop(Which::kStage08, p, in, default_upstream(p, 3), {"--drop-eps", "0.00390625"});
  ASSERT_EQ(static_cast<int64_t>(run.order.size()), p.v);
  std::vector<char> seen(static_cast<size_t>(p.v), 0);
  for (const int j : run.order) {
    ASSERT_TRUE(j >= 0 && j < p.v) << "entry " << j << " outside the vocabulary";
    ASSERT_EQ(seen[j]++, 0) << "entry " << j << " twice in the order";
  }
  std::vector<double> e_sum(static_cast<size_t>(p.d), 0.0), key(static_cast<size_t>(p.v), 0.0);
  for (int64_t i = 0; i < p.n; ++i)
    if (in.targets[i] != p.ignore_index)
      for (int64_t k = 0; k < p.d; ++k) e_sum[k] += in.e[i * p.d + k];
  double largest = 0.0;
  for (int64_t j = 0; j < p.v; ++j) {
    for (int64_t k = 0; k < p.d; ++k) key[j] += double(in.c[j * p.d + k]) * e_sum[k];
    largest = std::max(largest, std::fabs(key[j]));
  }
  int64_t rises = 0;
  for (int64_t pos = 0; pos + 1 < p.v; ++pos) {
    const double a = key[run.order[pos]], b = key[run.order[pos + 1]];
    rises += b > a + std::ldexp(std::max(std::fabs(a), std::fabs(b)), -6) + 1e-3 * largest;
  }
  EXPECT_EQ(rises, 0) << "places where the key rises along the order by more than the sort's resolution";
  EXPECT_GT(key[run.order.front()], key[run.order.back()]);
}

// --no-token-grouping: token blocks are the rows in their order, the kept
// list is still the brute-force one, and both ways pass the reference check.
TEST(PlanPerBatch, WithoutTokenGroupingRowsStayInOrder) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = decision_inputs(p, 83);
  const std::vector<float> upstream = default_upstream(p, 3);
  const DropRun grouped = run_stage10(p, in, upstream, {"--drop-eps", "0.00390625"});
  const DropRun ungrouped = run_stage10(p, in, upstream, {"--drop-eps", "0.00390625", "--no-token-grouping"});
  std::vector<int> identity(static_cast<size_t>(p.n));
  for (int64_t i = 0; i < p.n; ++i) identity[i] = static_cast<int>(i);
  EXPECT_EQ(ungrouped.token_order, identity);
  EXPECT_NE(grouped.token_order, identity) << "grouping left the rows in order: the test compares nothing";
  expect_brute_force_kept_list(brute_force(p, in, ungrouped), ungrouped, std::ldexp(1.0, -8));
  expect_reference_check(p, in, grouped, upstream, "grouped");
  expect_reference_check(p, in, ungrouped, upstream, "ungrouped");
}

// The first candidate whose brute-force misplaced mass is within `budget`
// (kAutoCandidates: none), or −1 when a mass up to it lies within 10% of the
// budget (the statistics' bf16 rounding moves a mass by far less).
int clear_candidate(const BruteForce& bf, double budget) {
  for (int k = 0; k < s10::kAutoCandidates; ++k) {
    const double mass = bf.misplaced_mass(s10::candidate_eps(k));
    if (std::fabs(mass - budget) < 0.1 * budget) return -1;
    if (mass <= budget) return k;
  }
  return s10::kAutoCandidates;
}

// The automatic eps is the largest of 2^-8, 2^-8.25 … 2^-17 whose brute-force
// misplaced mass over the rows' final grouping (the second one, near the first
// grouping's choice) is within the budget. The budget lies between the first
// grouping's masses at a candidate between powers of two and the one before it;
// the inputs: the first seed whose final masses are clear of it and choose a
// candidate between powers of two (a float the host and the device must agree on).
TEST(PlanPerBatch, AutomaticEpsIsTheLargestWithinTheBudget) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const std::vector<float> upstream = default_upstream(p, 3);
  for (uint64_t seed = 82; seed < 102; ++seed) {
    const HostInputs in = decision_inputs(p, seed);
    const DropRun fixed8 = run_stage10(p, in, upstream, {"--drop-eps", "0.00390625"});  // the first grouping only
    const BruteForce bf_first = brute_force(p, in, fixed8);
    double budget = 0.0;
    for (int k = 1; k < s10::kAutoCandidates && budget == 0.0; ++k) {
      if (k % s10::kAutoStepsPerExponent == 0) continue;
      const double above = bf_first.misplaced_mass(s10::candidate_eps(k - 1)), at = bf_first.misplaced_mass(s10::candidate_eps(k));
      if (at > 0.0 && above > 1.21 * at) budget = std::sqrt(above * at);
    }
    if (budget == 0.0) continue;
    const std::string budget_text = exact_text(budget);
    const DropRun automatic = run_stage10(p, in, upstream, {"--misplaced-mass", budget_text.c_str()});
    const BruteForce bf = brute_force(p, in, automatic);  // over its final grouping
    const int expected = clear_candidate(bf, budget);
    if (expected < 0 || expected == s10::kAutoCandidates || expected % s10::kAutoStepsPerExponent == 0) continue;
    const double eps = s10::candidate_eps(expected);
    std::printf("seed %llu, budget %.4g: expected eps 2^%g (misplaced mass %.4g), got %g (misplaced %.4g)\n",
                static_cast<unsigned long long>(seed), budget, s10::candidate_log2_eps(expected), bf.misplaced_mass(eps),
                automatic.stats.choice.eps, automatic.stats.choice.misplaced_mass);
    EXPECT_EQ(automatic.stats.choice.eps, static_cast<float>(eps));
    // The statistics hold each tile's sum in bf16 (2^-9 relative), which 1 − M/(|T|·p_max) magnifies in a near-flat tile.
    EXPECT_NEAR(automatic.stats.choice.misplaced_mass, bf.misplaced_mass(eps), 0.05 * bf.misplaced_mass(eps));
    expect_brute_force_kept_list(bf, automatic, eps);
    expect_reference_check(p, in, automatic, upstream, "automatic");
    const std::string eps_text = exact_text(eps);
    const DropRun by_hand = run_stage10(p, in, upstream, {"--drop-eps", eps_text.c_str()});
    EXPECT_EQ(by_hand.stats.choice.eps, static_cast<float>(eps));
    EXPECT_LT(by_hand.stats.choice.misplaced_mass, 0.0) << "a fixed eps measures no mass";
    return;
  }
  FAIL() << "seeds 82 to 101: no final grouping's masses clear of the budget with a choice between powers of two";
}

// The default budget (no flag) picks what the brute force picks at it, and a
// budget no candidate meets falls back to the smallest eps, 2^-17, each over
// its run's final grouping. The inputs: the first of a few seeds whose
// misplaced masses all lie more than 10% from the default budget.
TEST(PlanPerBatch, DefaultBudgetAndTheFallback) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(s10::PlanPerBatchStage().misplaced_mass_budget(), s10::kDefaultMisplacedMass);
  EXPECT_EQ(s10::kDefaultMisplacedMass, 0.022);
  const Problem p = bf16_problem(300, 128, 16411);
  const std::vector<float> upstream = default_upstream(p, 3);
  for (uint64_t seed = 84; seed < 104; ++seed) {
    const HostInputs in = decision_inputs(p, seed);
    const DropRun automatic = run_stage10(p, in, upstream, {});
    const BruteForce bf = brute_force(p, in, automatic);
    const int by_default = clear_candidate(bf, s10::kDefaultMisplacedMass);
    if (by_default < 0) continue;
    std::printf("seed %llu: the default budget %.3g picks 2^%g\n", static_cast<unsigned long long>(seed),
                s10::kDefaultMisplacedMass, s10::candidate_log2_eps(by_default));
    ASSERT_LT(by_default, s10::kAutoCandidates);
    const float eps = s10::candidate_eps(by_default);
    EXPECT_EQ(automatic.stats.choice.eps, eps);
    EXPECT_NEAR(automatic.stats.choice.misplaced_mass, bf.misplaced_mass(eps), 0.05 * bf.misplaced_mass(eps));
    const DropRun fallback = run_stage10(p, in, upstream, {"--misplaced-mass", "1e-12"});
    const BruteForce bf_fallback = brute_force(p, in, fallback);
    ASSERT_EQ(clear_candidate(bf_fallback, 1e-12), s10::kAutoCandidates)
        << "some candidate meets a tiny budget: the fallback is not exercised";
    EXPECT_EQ(fallback.stats.choice.eps, std::ldexp(1.0f, -s10::kAutoLastExponent));
    expect_brute_force_kept_list(bf_fallback, fallback, std::ldexp(1.0, -s10::kAutoLastExponent));
    return;
  }
  FAIL() << "seeds 84 to 103 all put a candidate within 10% of the default budget";
}

// The automatic eps's misplaced mass leaves out the targets' own entries
// (they are added exactly): with targets just below eps in dropped tiles, the
// mass it measures is the brute force's without them, which differs from the
// one with them by far more than the statistics' rounding.
TEST(PlanPerBatch, MisplacedMassLeavesOutTheTargets) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  HostInputs in = decision_inputs(p, 88);
  const std::vector<float> upstream = default_upstream(p, 3);
  const DropRun first = run_stage10(p, in, upstream, {"--misplaced-mass", "1"});  // any mass: 2^-8
  targets_at_the_edge(p, in, first, 1);
  const DropRun run = run_stage10(p, in, upstream, {"--misplaced-mass", "1"});
  ASSERT_EQ(run.stats.choice.eps, 0.00390625f);
  EXPECT_EQ(run.flags, first.flags) << "the targets changed the decision";
  const BruteForce bf = brute_force(p, in, run);
  const double without = bf.misplaced_mass(0x1p-8), with = bf.misplaced_mass(0x1p-8, true);
  ASSERT_GT(with, 1.15 * without) << "the dropped targets hold too little mass for the test to see them";
  EXPECT_NEAR(run.stats.choice.misplaced_mass, without, 0.05 * without);
}

// Token grouping: the token blocks take the rows with a gradient ordered by
// how many tiles hold an entry ≥ the threshold for them in powers of two
// (⌊log2(count + 1)⌋, most first), then by the rarest such tile (the fewest
// such rows, then the lowest index), then by the count (most first), then by
// their index; then the ignored rows. The expected order from the brute
// force's needs; empty when a need lies within 1e-4 of the threshold. Also
// the order by the count alone, to tell the two apart.
struct ExpectedOrders {
  std::vector<int> grouped, by_count;
};
ExpectedOrders expected_grouping(const Problem& p, const HostInputs& in, const BruteForce& bf, double log_threshold) {
  const std::vector<signed char> needs = bf.needs_at(log_threshold);
  if (std::count(needs.begin(), needs.end(), -1) > 0) return {};
  const int64_t tiles = bf.tiles;
  const auto ignored = [&](int64_t i) { return in.targets[i] == p.ignore_index; };
  std::vector<int64_t> rows_hot(static_cast<size_t>(tiles), 0), count(static_cast<size_t>(p.n), 0);
  for (int64_t i = 0; i < p.n; ++i)
    for (int64_t t = 0; t < tiles; ++t)
      if (!ignored(i) && needs[i * tiles + t] == 1) ++rows_hot[t], ++count[i];
  std::vector<int64_t> rarest(static_cast<size_t>(p.n), tiles * (p.n + 1)), bucket(static_cast<size_t>(p.n), 0);
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t t = 0; t < tiles; ++t)  // rows_hot·tiles + t; none: after every tile
      if (!ignored(i) && needs[i * tiles + t] == 1) rarest[i] = std::min(rarest[i], rows_hot[t] * tiles + t);
    while ((int64_t{2} << bucket[i]) <= count[i] + 1) ++bucket[i];
  }
  ExpectedOrders orders;
  orders.grouped.resize(static_cast<size_t>(p.n));
  for (int64_t i = 0; i < p.n; ++i) orders.grouped[i] = static_cast<int>(i);
  orders.by_count = orders.grouped;
  std::stable_sort(orders.grouped.begin(), orders.grouped.end(), [&](int a, int b) {
    return std::make_tuple(ignored(a), -bucket[a], rarest[a], -count[a]) <
           std::make_tuple(ignored(b), -bucket[b], rarest[b], -count[b]);
  });
  std::stable_sort(orders.by_count.begin(), orders.by_count.end(), [&](int a, int b) {
    return std::make_tuple(ignored(a), -count[a]) < std::make_tuple(ignored(b), -count[b]);
  });
  return orders;
}

// At a fixed eps the rows are grouped once, with needs tested at 2^-12. On a
// seed where no need is within 1e-4 of it and the rarest tiles change the order.
TEST(PlanPerBatch, TokenGroupingOrdersRowsByCountBucketRarestTileThenCount) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  for (uint64_t seed = 85; seed < 100; ++seed) {
    const HostInputs in = decision_inputs(p, seed);
    const DropRun run = run_stage10(p, in, default_upstream(p, 3), {"--drop-eps", "0.00390625"});
    const BruteForce bf = brute_force(p, in, run);
    const ExpectedOrders expected =
        expected_grouping(p, in, bf, std::log(std::ldexp(1.0, -s10::kGroupingExponent)));
    if (expected.grouped.empty() || expected.grouped == expected.by_count) continue;
    ASSERT_LT(count_valid_targets(p, in.targets), p.n) << "no ignored row: their place is not tested";
    EXPECT_EQ(run.token_order, expected.grouped) << "seed " << seed;
    return;
  }
  FAIL() << "no seed whose needs are all clear of 2^-12 and whose rarest tiles change the order";
}

// With the automatic eps the rows are grouped again: needs tested
// kRegroupExponents below the eps that the first grouping's masses choose.
// The brute force makes that choice over the first grouping's blocks (at
// 2^-12), then the expected second grouping at the choice's threshold.
TEST(PlanPerBatch, AutomaticEpsRegroupsNearTheEpsTheFirstGroupingChooses) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  for (uint64_t seed = 85; seed < 125; ++seed) {
    const HostInputs in = decision_inputs(p, seed);
    DropRun run = run_stage10(p, in, default_upstream(p, 3), {});
    const BruteForce any_blocks = brute_force(p, in, run);  // the needs do not depend on the blocks
    const ExpectedOrders first =
        expected_grouping(p, in, any_blocks, std::log(std::ldexp(1.0, -s10::kGroupingExponent)));
    if (first.grouped.empty()) continue;
    const std::vector<int> final_order = run.token_order;
    run.token_order = first.grouped;  // the first grouping's blocks, for its masses
    const BruteForce bf_first = brute_force(p, in, run);
    int k1 = s10::kAutoCandidates - 1;
    bool clear = true;  // no mass up to the choice within 10% of the budget (the stage's sums are fp32's)
    for (int k = 0; k < s10::kAutoCandidates; ++k) {
      const double mass = bf_first.misplaced_mass(s10::candidate_eps(k));
      clear = clear && std::fabs(mass - s10::kDefaultMisplacedMass) > 0.1 * s10::kDefaultMisplacedMass;
      if (mass <= s10::kDefaultMisplacedMass) {
        k1 = k;
        break;
      }
    }
    if (!clear) continue;
    const double log_threshold = std::log(static_cast<double>(s10::candidate_eps(k1))) -
                                 static_cast<double>(s10::kRegroupExponents) * std::log(2.0);
    const ExpectedOrders second = expected_grouping(p, in, any_blocks, log_threshold);
    if (second.grouped.empty() || second.grouped == first.grouped) continue;  // the regrouping would not show
    EXPECT_EQ(final_order, second.grouped) << "seed " << seed << ", first choice 2^" << s10::candidate_log2_eps(k1);
    return;
  }
  FAIL() << "no seed whose needs and masses are clear of the thresholds and whose regrouping changes the order";
}

// A batch after an automatic decision of the same model is grouped once, near
// the eps the batch before chose: a stage object's first run, with a budget no
// candidate meets, chooses 2^-17; its second, with any mass (1: 2^-8), tests
// the needs kRegroupExponents below 2^-17, not near 2^-8 as a first run with
// that budget does, and chooses from the masses over those blocks. The inputs:
// the first seed whose needs are clear of that test and whose order it changes.
TEST(PlanPerBatch, NextBatchIsGroupedNearTheEpsTheBatchBeforeChose) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const std::vector<float> upstream = default_upstream(p, 3);
  for (uint64_t seed = 85; seed < 125; ++seed) {
    const HostInputs in = decision_inputs(p, seed);
    s10::PlanPerBatchStage stage;
    const DropRun first = run_stage10_on(stage, p, in, upstream, {"--misplaced-mass", "1e-12"});
    const DropRun second = run_stage10_on(stage, p, in, upstream, {"--misplaced-mass", "1"});
    const DropRun alone = run_stage10(p, in, upstream, {"--misplaced-mass", "1"});  // no batch before
    ASSERT_EQ(first.stats.choice.eps, std::ldexp(1.0f, -s10::kAutoLastExponent));
    const BruteForce bf = brute_force(p, in, second);  // the needs do not depend on the blocks
    const float log_threshold = s10::near_eps_log_threshold(std::log(first.stats.choice.eps));
    const ExpectedOrders expected = expected_grouping(p, in, bf, log_threshold);
    if (expected.grouped.empty() || expected.grouped == alone.token_order) continue;  // the history would not show
    EXPECT_EQ(second.token_order, expected.grouped) << "seed " << seed;
    ASSERT_EQ(second.stats.choice.eps, 0.00390625f);
    EXPECT_NEAR(second.stats.choice.misplaced_mass, bf.misplaced_mass(0x1p-8), 0.05 * bf.misplaced_mass(0x1p-8));
    expect_brute_force_kept_list(bf, second, 0x1p-8);
    return;
  }
  FAIL() << "no seed whose needs are clear of the test near 2^-17 and whose order it changes";
}

// The vocabulary order of the batch before: a stage object's next batch (other
// rows, the same C) keeps the first batch's order, not the one its own rows
// sort to, and its kept list and outputs are still the brute force's and
// within the reference check; the kSortEveryBatches-th batch after the first
// sorts again, and --sort-every 1 sorts every batch, as a fresh object does.
TEST(PlanPerBatch, NextBatchKeepsTheVocabularyOrder) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const std::vector<float> upstream = default_upstream(p, 3);
  const HostInputs first_in = decision_inputs(p, 90);
  HostInputs next_in = decision_inputs(p, 91);
  next_in.c = first_in.c;
  const std::vector<const char*> flags = {"--drop-eps", "0.00390625"};
  const DropRun alone = run_stage10(p, next_in, upstream, flags);  // no batch before: its own order
  s10::PlanPerBatchStage stage;
  const DropRun first = run_stage10_on(stage, p, first_in, upstream, flags);
  ASSERT_NE(alone.order, first.order) << "the two batches sort alike: the test compares nothing";
  const DropRun next = run_stage10_on(stage, p, next_in, upstream, flags);
  EXPECT_EQ(next.order, first.order);
  EXPECT_NE(next.report[0].find("the vocabulary order sorted 1 batch(es) before"), std::string::npos) << next.report[0];
  expect_brute_force_kept_list(brute_force(p, next_in, next), next, 0x1p-8);
  expect_reference_check(p, next_in, next, upstream, "the batch before's order");
  for (int batch = 3; batch <= s10::kSortEveryBatches; ++batch)
    ASSERT_EQ(run_stage10_on(stage, p, next_in, upstream, flags).order, first.order) << "batch " << batch;
  const DropRun again = run_stage10_on(stage, p, next_in, upstream, flags);
  EXPECT_EQ(again.order, alone.order) << "batch " << s10::kSortEveryBatches + 1 << " kept the old order";
  EXPECT_NE(again.report[0].find("the vocabulary sorted this batch"), std::string::npos) << again.report[0];

  const std::vector<const char*> every = {"--drop-eps", "0.00390625", "--sort-every", "1"};
  s10::PlanPerBatchStage sorting;
  run_stage10_on(sorting, p, first_in, upstream, every);
  EXPECT_EQ(run_stage10_on(sorting, p, next_in, upstream, every).order, alone.order);
}

// At the automatic eps, with tiles and targets dropped, the tail sums in the
// statistics rows, several backward chunks (1 MiB of slots) and several
// forward chunks (4096 rows of C each): bitwise equal over two runs, and
// within the reference check. Where dC's owners can read rows by TMA, E's rows
// go to them through a copy in the token order (the work buffer's slots are
// more than half of a chunk's with the dE output's): that path, too.
TEST(PlanPerBatch, BitwiseEqualOverTwoRunsAtTheAutomaticEps) {
  SKIP_WITHOUT_GPU();
  Problem p = bf16_problem(1100, 192, 30011);
  p.softcap = 30.0f;
  GeneratorOptions gen;
  gen.seed = 5;
  gen.ignore_fraction = 0.05;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 4);
  const std::vector<const char*> flags = {"--slot-mb", "1", "--chunk-rows", "4096"};
  const s10::DropPlan plan = s10::plan_drop(p, 4096, size_t{1} << 20);
  EXPECT_TRUE(plan.tail_sums_in_stats) << "the dC tail sums should live in the statistics rows at this shape";
  EXPECT_EQ(plan.chunk_rows, 4096);
  EXPECT_GT((p.v + plan.chunk_rows - 1) / plan.chunk_rows, 1) << "one forward chunk";
  const DropRun a = run_stage10(p, in, upstream, flags);
  const DropRun b = run_stage10(p, in, upstream, flags);
  EXPECT_GT(a.stats.choice.misplaced_mass, 0.0) << "the automatic eps measured no mass";
  EXPECT_LT(a.stats.kept_tiles, a.stats.tiles) << "nothing dropped";
  EXPECT_GT(a.stats.chunks, 1) << "one backward chunk: the order across chunks is not exercised";
  EXPECT_GT(dropped_targets(p, in, a), 0) << "no target in a dropped tile: their exact terms are not exercised";
  ASSERT_TRUE(s10::rows_copy_pays(plan, plan.chunk_slots() + 1))
      << "without the dE output's slots the chunks would more than double: no copy at this shape";
  if (s09::dc_rows_by_tma(p)) {
    const bool copied = std::any_of(a.report.begin(), a.report.end(), [](const std::string& line) {
      return line.find("read E's rows by TMA from a copy in the token order") != std::string::npos;
    });
    EXPECT_TRUE(copied) << "E's rows were not copied into the token order for dC's owners";
  }
  EXPECT_EQ(a.out.loss, b.out.loss);
  EXPECT_EQ(a.out.lse, b.out.lse);
  EXPECT_TRUE(a.out.de == b.out.de) << "dE differs between two runs";
  EXPECT_TRUE(a.out.dc == b.out.dc) << "dC differs between two runs";
  expect_reference_check(p, in, a, upstream, "automatic eps, several chunks");
}

// With loss and gradient in one call, dC's output (V × D) holds all of sorted
// C and the forward runs in one chunk where the work buffer holds fewer rows
// (here 1 MiB of slots); --chunk-rows keeps the chunks. Both match the
// reference, and the one chunk gives the same bits twice.
TEST(PlanPerBatch, ForwardGathersSortedCIntoDc) {
  SKIP_WITHOUT_GPU();
  for (const Dtype dtype : {Dtype::kBFloat16, Dtype::kFloat32}) {
    Problem p = bf16_problem(300, 200, 30011);
    p.dtype = dtype;
    p.softcap = dtype == Dtype::kBFloat16 ? 30.0f : 0.0f;
    const HostInputs in = seeded_inputs(p, 12, 0.05);
    const std::vector<float> upstream = default_upstream(p, 4);
    const std::string what = to_string(dtype);
    const s10::DropPlan plan = s10::plan_drop(p, 0, size_t{1} << 20);
    ASSERT_LT(plan.chunk_rows, p.v) << what << ": the work buffer holds every row of C";
    const DropRun one = run_stage10(p, in, upstream, {"--slot-mb", "1"});
    ASSERT_FALSE(one.report.empty());
    EXPECT_NE(one.report[0].find("forward chunks of 30011 rows of C; "), std::string::npos) << one.report[0];
    EXPECT_NE(one.report[0].find("sorted C in dC's output"), std::string::npos) << one.report[0];
    expect_reference_check(p, in, one, upstream, (what + ", one chunk in dC").c_str());
    const DropRun again = run_stage10(p, in, upstream, {"--slot-mb", "1"});
    EXPECT_TRUE(again.out.loss == one.out.loss && again.out.lse == one.out.lse && again.out.de == one.out.de &&
                again.out.dc == one.out.dc)
        << what << ": one chunk in dC differs over two runs";
    const std::string rows = std::to_string(plan.chunk_rows);
    const DropRun chunks = run_stage10(p, in, upstream, {"--slot-mb", "1", "--chunk-rows", rows.c_str()});
    EXPECT_NE(chunks.report[0].find("forward chunks of " + rows + " rows of C; "), std::string::npos) << chunks.report[0];
    EXPECT_EQ(chunks.report[0].find("dC's output"), std::string::npos) << chunks.report[0];
    expect_reference_check(p, in, chunks, upstream, (what + ", chunks").c_str());
    const DropRun apart = run_stage10(p, in, upstream, {"--slot-mb", "1"}, Calls::kApart);
    EXPECT_EQ(apart.report[0].find("dC's output"), std::string::npos) << what << ": a forward alone has no dC";
  }
}

TEST(PlanPerBatch, SlotsInTheStatisticsRowsHoldTheirTiles) {
  SKIP_WITHOUT_GPU();
  // N = 16384: a statistics row (4N bytes) has room for one S tile (32 KB)
  // beside the dC tail sums, 100 rows (V = 12800); with 1 MiB of slots in the
  // work buffer (32) and the dE output's (32), a chunk of consecutive tiles
  // reaches into the statistics.
  const Problem p = bf16_problem(16384, 32, 12800);
  const s10::DropPlan plan = s10::plan_drop(p, 0, size_t{1} << 20);  // as --slot-mb 1
  ASSERT_GT(plan.stats_slot_capacity, 0) << "this shape should spill S tiles into the statistics";
  GeneratorOptions gen;
  gen.seed = 21;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 1);
  const DropRun run = run_stage10(p, in, upstream, {"--slot-mb", "1"});
  EXPECT_LT(run.stats.kept_tiles, run.stats.tiles) << "nothing dropped: the automatic eps is not exercised";
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
  std::printf("%lld of %lld tiles kept at eps %g, %lld chunks of at most %lld S tiles, %lld in the statistics\n",
              static_cast<long long>(run.stats.kept_tiles), static_cast<long long>(run.stats.tiles),
              run.stats.choice.eps, static_cast<long long>(run.stats.chunks),
              static_cast<long long>(plan.chunk_slots()), static_cast<long long>(plan.stats_slot_capacity));
  expect_reference_check(p, in, run, upstream, "slots in the statistics");
}

// Row i's logits z_ij = E_i·C_j in double, into z [V]; returns the row's LSE.
double row_logits(const Problem& p, const HostInputs& in, int64_t i, std::vector<double>& z) {
  double m = -INFINITY, sum = 0.0;
  for (int64_t j = 0; j < p.v; ++j) {
    z[j] = 0.0;
    for (int64_t k = 0; k < p.d; ++k) z[j] += double(in.e[i * p.d + k]) * in.c[j * p.d + k];
    m = std::max(m, z[j]);
  }
  for (int64_t j = 0; j < p.v; ++j) sum += std::exp(z[j] - m);
  return m + std::log(sum);
}

// Stage 08's algorithm in double, on a run's decisions: the kept pairs
// exact; for a dropped pair (T, b), each row i of b with a gradient gets
// g_i M_iT C̄_T in dE (M_iT: T's softmax mass without t_i, C̄_T: the mean of
// T's rows of C) and every row of T gets Σ_i g_i M_iT E_i / |T| in dC; a
// target in a dropped tile exact. No softcap (its derivative at the tile max
// is the stage's own approximation). `share` scales the correction (1: the
// algorithm; 0: none; 0.5: a half-strength one).
// With the arithmetic's bound on the correction itself: M_iT comes from the
// statistics (s_iT·exp(m_iT − LSE_i) − p_{i,t_i}, relative error η' of what
// it sums, η' = 4·δLSE_i + 2·|T|·u), and its products add up in fp32 (2N·u
// for dC's tail sums, 2·tiles·u for dE).
struct Gradients {
  std::vector<double> de, dc;
  std::vector<double> de_bound, dc_bound;  // the correction's own rounding, beyond the reference's bound
};
Gradients corrected_model(const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                          const DropRun& run, const ReferenceResult& ref, double de_share, double dc_share) {
  const int64_t cols = s08::backward_tile(p.dtype), blocks = (p.n + cols - 1) / cols, tiles = (p.v + cols - 1) / cols;
  const int64_t n_valid = count_valid_targets(p, in.targets);
  const std::vector<int64_t> block = token_block_of(p, run);
  Gradients out{std::vector<double>(p.n * p.d, 0.0), std::vector<double>(p.v * p.d, 0.0),
                std::vector<double>(p.n * p.d, 0.0), std::vector<double>(p.v * p.d, 0.0)};
  std::vector<double> mean(tiles * p.d, 0.0), tail(tiles * p.d, 0.0), tail_bound(tiles * p.d, 0.0), z(p.v);
  const double u = kFp32Unit;
  auto tile_size = [&](int64_t t) { return std::min(p.v, (t + 1) * cols) - t * cols; };
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t pos = t * cols; pos < t * cols + tile_size(t); ++pos)
      for (int64_t k = 0; k < p.d; ++k) mean[t * p.d + k] += in.c[run.order[pos] * p.d + k] / double(tile_size(t));
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t target = in.targets[i];
    const double g = upstream_for_token(p, upstream, n_valid, i, target);
    if (g == 0.0) continue;
    const double lse = row_logits(p, in, i, z);
    auto add = [&](int64_t j, double s_ij) {
      for (int64_t k = 0; k < p.d; ++k) {
        out.de[i * p.d + k] += s_ij * in.c[j * p.d + k];
        out.dc[j * p.d + k] += s_ij * in.e[i * p.d + k];
      }
    };
    for (int64_t t = 0; t < tiles; ++t) {
      const bool kept = run.flags[t * blocks + block[i]] != 0;
      double mass = 0.0, summed = 0.0;  // M_iT, and what the statistics sum for it (the target too)
      for (int64_t pos = t * cols; pos < t * cols + tile_size(t); ++pos) {
        const int64_t j = run.order[pos];
        const double prob = std::exp(z[j] - lse);
        if (kept) add(j, g * (prob - (j == target ? 1.0 : 0.0)));
        else if (j == target) add(j, g * (prob - 1.0));
        else mass += prob;
        summed += prob;
      }
      if (kept) continue;
      const double mass_error = (4.0 * ref.lse_bound[i] + 2.0 * double(cols) * u) * summed;
      for (int64_t k = 0; k < p.d; ++k) {
        out.de[i * p.d + k] += de_share * g * mass * mean[t * p.d + k];
        tail[t * p.d + k] += dc_share * g * mass * in.e[i * p.d + k];
        if (de_share != 0.0)
          out.de_bound[i * p.d + k] += g * (mass_error + 2.0 * double(tiles) * u * mass) * std::fabs(mean[t * p.d + k]);
        if (dc_share != 0.0)
          tail_bound[t * p.d + k] += g * (mass_error + 2.0 * double(p.n) * u * mass) * std::fabs(in.e[i * p.d + k]);
      }
    }
  }
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t pos = t * cols; pos < t * cols + tile_size(t); ++pos)
      for (int64_t k = 0; k < p.d; ++k) {
        out.dc[run.order[pos] * p.d + k] += tail[t * p.d + k] / double(tile_size(t));
        out.dc_bound[run.order[pos] * p.d + k] += tail_bound[t * p.d + k] / double(tile_size(t));
      }
  return out;
}

// The tail correction held to the algorithm: in fp32 at a coarse eps (2^-6,
// so that the correction is far above the arithmetic's bound), dE and dC
// match the double model within that bound, for dE and dC corrected, dE
// only, and neither; a half-strength correction, or none where the model has
// one, fails.
void check_tail_correction_is_the_algorithms(Which which) {
  SKIP_WITHOUT_GPU();
  Problem p;
  p.n = 300;
  p.d = 128;
  p.v = 1129;
  p.dtype = Dtype::kFloat32;
  HostInputs in = decision_inputs(p, 86);
  const std::vector<float> upstream = default_upstream(p, 3);
  const char* eps = "0.015625";
  // Targets just below eps in dropped tiles: the correction must leave their
  // entries out of a tile's mass (they are added exactly).
  targets_at_the_edge(p, in, run_drop(which, p, in, upstream, {"--drop-eps", eps}), 3);
  const DropRun both = run_drop(which, p, in, upstream, {"--drop-eps", eps});
  const bool has_de_only = which != Which::kStage08;  // --no-dc-correction: stages 09 and 10
  const DropRun de_only =
      has_de_only ? run_drop(which, p, in, upstream, {"--drop-eps", eps, "--no-dc-correction"}) : DropRun{};
  const DropRun none = run_drop(which, p, in, upstream, {"--drop-eps", eps, "--no-correction"});
  ASSERT_LT(both.stats.kept_tiles, both.stats.tiles) << "nothing dropped";
  ASSERT_GT(both.stats.kept_tiles, 0);
  ASSERT_GT(dropped_targets(p, in, both), 0) << "no target in a dropped tile";
  EXPECT_EQ(both.flags, none.flags);
  if (has_de_only) {
    EXPECT_EQ(both.flags, de_only.flags);
  }

  ReferenceOptions opt;  // the arithmetic's bound for this problem (nothing left out)
  opt.backward = true;
  opt.upstream = upstream;
  opt.bounds = true;
  const ReferenceResult ref = reference_cross_entropy(p, in, opt);
  auto plus = [](std::vector<double> a, const std::vector<double>& b) {
    for (size_t x = 0; x < a.size(); ++x) a[x] += b[x];
    return a;
  };
  auto matches = [&](const DropRun& run, const Gradients& model, const char* what) {
    const Comparison de = compare("dE", run.out.de, model.de, plus(ref.de_bound, model.de_bound), ref.output_rtol, p.d);
    const Comparison dc = compare("dC", run.out.dc, model.dc, plus(ref.dc_bound, model.dc_bound), ref.output_rtol, p.d);
    std::printf("%-34s %s\n%-34s %s\n", what, de.summary().c_str(), "", dc.summary().c_str());
    return std::make_pair(de.passed(), dc.passed());
  };
  const Gradients full = corrected_model(p, in, upstream, both, ref, 1.0, 1.0);
  const Gradients half = corrected_model(p, in, upstream, both, ref, 0.5, 0.5);
  const Gradients de_model = corrected_model(p, in, upstream, both, ref, 1.0, 0.0);
  const Gradients no_model = corrected_model(p, in, upstream, both, ref, 0.0, 0.0);
  EXPECT_EQ(matches(both, full, "corrected vs the model"), std::make_pair(true, true));
  if (has_de_only) {
    EXPECT_EQ(matches(de_only, de_model, "dE corrected vs the model"), std::make_pair(true, true));
  }
  EXPECT_EQ(matches(none, no_model, "uncorrected vs the model"), std::make_pair(true, true));
  // The same runs against the wrong models must fail: the test has the power to see a wrong correction.
  EXPECT_EQ(matches(both, half, "corrected vs half the correction"), std::make_pair(false, false));
  EXPECT_EQ(matches(none, full, "uncorrected vs the corrected model"), std::make_pair(false, false));
  if (has_de_only) {
    EXPECT_EQ(matches(de_only, full, "dE corrected vs the corrected model"), std::make_pair(true, false));
  }
  // And every run within what it declares to the generic check.
  expect_reference_check(p, in, both, upstream, "corrected");
  expect_reference_check(p, in, none, upstream, "uncorrected");
}
TEST(DropBeforeRecompute, TailCorrectionIsTheAlgorithms) { check_tail_correction_is_the_algorithms(Which::kStage08); }
TEST(DeterministicProducts, TailCorrectionIsTheAlgorithms) { check_tail_correction_is_the_algorithms(Which::kStage09); }
TEST(PlanPerBatch, TailCorrectionIsTheAlgorithms) { check_tail_correction_is_the_algorithms(Which::kStage10); }

// Dropping without the correction moves dE and dC by at most stage 07's
// bound: each dropped S_ij is below g_i·eps.
void check_dropping_stays_within_the_bound(Which which) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(256, 128, 16411);
  GeneratorOptions gen;
  gen.seed = 12;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 1);  // mean: every g_i = 1/#valid
  const double eps = std::ldexp(1.0, -8);
  const DropRun exact = run_drop(which, p, in, upstream, {"--keep-all"});
  const DropRun dropped = run_drop(which, p, in, upstream, {"--drop-eps", "0.00390625", "--no-correction"});
  EXPECT_LT(dropped.stats.kept_tiles, dropped.stats.tiles);
  EXPECT_EQ(exact.stats.kept_tiles, exact.stats.tiles);

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
}
TEST(DropBeforeRecompute, DroppingStaysWithinTheBound) { check_dropping_stays_within_the_bound(Which::kStage08); }
TEST(DeterministicProducts, DroppingStaysWithinTheBound) { check_dropping_stays_within_the_bound(Which::kStage09); }
TEST(PlanPerBatch, DroppingStaysWithinTheBound) { check_dropping_stays_within_the_bound(Which::kStage10); }

// Softcap, ignored tokens and per-token upstream gradients with tiles dropped
// at the default eps (stage 10: the automatic eps): the reference check with
// what the run declares.
// bf16 inputs with softcap 30, reduction none, a share of ignored targets,
// 10 targets spread over the vocabulary, and an upstream gradient U(0.5, 1.5)
// per token.
struct SoftcapIgnoredCase {
  Problem p;
  HostInputs in;
  std::vector<float> upstream;
};
SoftcapIgnoredCase softcap_ignored_case(int64_t n, int64_t d, int64_t v, int seed, double ignore_fraction) {
  SoftcapIgnoredCase c;
  c.p = bf16_problem(n, d, v);
  c.p.softcap = 30.0f;
  c.p.reduction = Reduction::kNone;
  GeneratorOptions gen;
  gen.seed = seed;
  gen.ignore_fraction = ignore_fraction;
  c.in = generate_inputs(c.p, gen);
  spread_some_targets(c.p, c.in, 10);
  c.upstream = default_upstream(c.p, 5);
  return c;
}

void check_softcap_and_ignored_tokens_with_tiles_dropped(Which which) {
  SKIP_WITHOUT_GPU();
  const auto [p, in, upstream] = softcap_ignored_case(300, 128, 16411, 87, 0.2);
  const DropRun run = run_drop(which, p, in, upstream, {});
  EXPECT_LT(run.stats.kept_tiles, run.stats.tiles) << "nothing dropped";
  EXPECT_GT(dropped_targets(p, in, run), 0) << "no target in a dropped tile";
  expect_reference_check(p, in, run, upstream, "softcap, ignored, none");
}
TEST(DropBeforeRecompute, SoftcapAndIgnoredTokensWithTilesDropped) { check_softcap_and_ignored_tokens_with_tiles_dropped(Which::kStage08); }
TEST(DeterministicProducts, SoftcapAndIgnoredTokensWithTilesDropped) { check_softcap_and_ignored_tokens_with_tiles_dropped(Which::kStage09); }
TEST(PlanPerBatch, SoftcapAndIgnoredTokensWithTilesDropped) { check_softcap_and_ignored_tokens_with_tiles_dropped(Which::kStage10); }

void check_every_token_with_the_same_target(Which which) {
  SKIP_WITHOUT_GPU();
  Problem p = bf16_problem(300, 96, 5003);
  p.reduction = Reduction::kSum;
  GeneratorOptions gen;
  gen.seed = 3;
  HostInputs in = generate_inputs(p, gen);
  std::fill(in.targets.begin(), in.targets.end(), 4001);
  const std::vector<float> upstream = default_upstream(p, 2);
  expect_reference_check(p, in, run_drop(which, p, in, upstream, {}), upstream, "same target");
}
TEST(DropBeforeRecompute, EveryTokenWithTheSameTarget) { check_every_token_with_the_same_target(Which::kStage08); }
TEST(DeterministicProducts, EveryTokenWithTheSameTarget) { check_every_token_with_the_same_target(Which::kStage09); }
TEST(PlanPerBatch, EveryTokenWithTheSameTarget) { check_every_token_with_the_same_target(Which::kStage10); }

// The kept-tile products run on wgmma on a Hopper GPU (sm_90a build, D % 8 ==
// 0) and on mma.sync elsewhere; CCE_TILE_PATH=mma_sync asks for the latter
// here. Both pass the reference check, each bitwise repeatable, at a shape
// with a partial token block, a partial vocabulary tile and a column tile of
// D holding 8 columns (D = 136).
TEST(DeterministicProducts, BothProductPathsMatchTheReference) {
  SKIP_WITHOUT_GPU();
  const auto [p, in, upstream] = softcap_ignored_case(600, 136, 16411, 21, 0.1);
  for (const char* path : {"", "mma_sync"}) {  // "": the fastest path here
    ASSERT_EQ(setenv("CCE_TILE_PATH", path, 1), 0);
    const DropRun run = run_drop(Which::kStage09, p, in, upstream, {});
    const DropRun again = run_drop(Which::kStage09, p, in, upstream, {});
    EXPECT_LT(run.stats.kept_tiles, run.stats.tiles) << "nothing dropped";
    expect_reference_check(p, in, run, upstream, *path ? path : "fastest path");
    EXPECT_TRUE(run.out.de == again.out.de) << path << ": dE differs between two runs";
    EXPECT_TRUE(run.out.dc == again.out.dc) << path << ": dC differs between two runs";
  }
  unsetenv("CCE_TILE_PATH");
}


// The kept pairs' bf16 products against their masked model in double. Without
// the correction, dE and dC are exactly the sums over the kept pairs (and the
// dropped targets' exact terms): corrected_model with no share. At eps = 2^-5
// the realistic inputs at this small V keep between 15% and 85% of the pairs,
// a block-sparse set of the data's making (with stage 10, of grouped rows,
// split into dE's parts). Each product path must match the model within the
// arithmetic's bound: the fastest (wgmma on a Hopper build, D % 8 == 0) and
// mma.sync at D = 136 (a column tile of D holding 8 columns), mma.sync alone
// at D = 100 (16-byte rows impossible). The unmasked gradients must not match:
// the test sees a tile's products missing.
void check_kept_products_are_the_masked_products(Which which) {
  SKIP_WITHOUT_GPU();
  for (const int64_t d : {int64_t{136}, int64_t{100}}) {
    const Problem p = bf16_problem(600, d, 16411);
    const HostInputs in = decision_inputs(p, 31);
    const std::vector<float> upstream = default_upstream(p, 7);
    ReferenceOptions opt;
    opt.backward = true;
    opt.upstream = upstream;
    opt.bounds = true;
    const ReferenceResult ref = reference_cross_entropy(p, in, opt);
    Gradients model;
    std::vector<uint8_t> model_flags;
    for (const char* path : {"", "mma_sync"}) {  // "": the fastest path here
      if (d % 8 != 0 && *path) continue;
      ASSERT_EQ(setenv("CCE_TILE_PATH", path, 1), 0);
      const DropRun run = run_drop(which, p, in, upstream, {"--drop-eps", "0.03125", "--no-correction"});
      const double kept = static_cast<double>(run.stats.kept_tiles) / static_cast<double>(run.stats.tiles);
      EXPECT_GT(kept, 0.15) << "D = " << d << ": too few pairs kept for a block-sparse set";
      EXPECT_LT(kept, 0.85) << "D = " << d << ": too few pairs dropped for a block-sparse set";
      if (model_flags.empty()) {
        model = corrected_model(p, in, upstream, run, ref, 0.0, 0.0);
        model_flags = run.flags;
      }
      ASSERT_EQ(run.flags, model_flags) << "the decision does not depend on the product path";
      const std::string what = std::string(*path ? path : "fastest path") + ", D = " + std::to_string(d);
      const Comparison de = compare("dE", run.out.de, model.de, ref.de_bound, ref.output_rtol, p.d);
      const Comparison dc = compare("dC", run.out.dc, model.dc, ref.dc_bound, ref.output_rtol, p.d);
      std::printf("%-26s %s\n%-26s %s\n", what.c_str(), de.summary().c_str(), "", dc.summary().c_str());
      EXPECT_TRUE(de.passed()) << what << ": " << de.summary();
      EXPECT_TRUE(dc.passed()) << what << ": " << dc.summary();
      EXPECT_FALSE(compare("dE", run.out.de, ref.de, ref.de_bound, ref.output_rtol, p.d).passed())
          << what << ": the unmasked dE matches too: the test could not see a missing tile";
      EXPECT_FALSE(compare("dC", run.out.dc, ref.dc, ref.dc_bound, ref.output_rtol, p.d).passed())
          << what << ": the unmasked dC matches too: the test could not see a missing tile";
    }
  }
  unsetenv("CCE_TILE_PATH");
}
TEST(DeterministicProducts, KeptProductsAreTheMaskedProducts) {
  check_kept_products_are_the_masked_products(Which::kStage09);
}
TEST(PlanPerBatch, KeptProductsAreTheMaskedProducts) { check_kept_products_are_the_masked_products(Which::kStage10); }

// A frozen classifier: with a null dC, stages 09 and 10 skip dC's work
// (products, tail, the dense plan's GEMM) and write the same dE, bit for bit.
TEST(PlanPerBatch, NullDcLeavesDeAsItWas) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = seeded_inputs(p, 31);
  const std::vector<float> upstream = default_upstream(p, 1);
  const DeviceInputs dev = DeviceInputs::upload(p, in);
  DeviceBuffer<float> loss(1), lse(static_cast<size_t>(p.n)), up(upstream.size());
  copy_to_device(up.get(), upstream.data(), upstream.size() * 4);
  DeviceBuffer<uint8_t> de(static_cast<size_t>(p.n * p.d) * 2), dc(static_cast<size_t>(p.v * p.d) * 2);
  auto de_after = [&](Stage& stage, void* dc_or_null) {
    stage.expect_backward(true);
    stage.forward(dev, loss.get(), lse.get(), nullptr);
    stage.backward(dev, lse.get(), up.get(), de.get(), dc_or_null, nullptr);
    CCE_CUDA_CHECK(cudaDeviceSynchronize());
    return download_values(de, p.dtype);
  };
  s09::DeterministicProductsStage stage09;
  ASSERT_TRUE(stage09.skips_null_dc());
  EXPECT_TRUE(de_after(stage09, dc.get()) == de_after(stage09, nullptr)) << "stage 09";
  for (const char* plan : {"sparse", "dense"}) {
    s10::PlanPerBatchStage stage10;
    OptionParser parser(stage10.name());
    stage10.add_options(parser);
    const char* argv[] = {"stage", "--plan", plan};
    ASSERT_TRUE(parser.parse(3, const_cast<char**>(argv)));
    stage10.validate_options();
    EXPECT_TRUE(de_after(stage10, dc.get()) == de_after(stage10, nullptr)) << "stage 10, " << plan;
  }
}

// ---- Stage 10's plan: sparse or dense ----
// The dense plan claims an exact gradient: the check allows the arithmetic only.
void expect_exact_reference_check(const Problem& p, const HostInputs& in, const DropRun& run,
                                  const std::vector<float>& upstream, const std::string& what) {
  EXPECT_EQ(run.approximation.eps, 0.0) << what << ": the dense plan declares something left out";
  const CheckReport report = check_outputs(p, in, run.out, upstream, true, int64_t{1} << 30, 8, run.approximation);
  EXPECT_EQ(report.note, "full check: every output element");
  for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << what << ": " << cmp.summary();
}

// Random data: a flat softmax.
HostInputs random_inputs(const Problem& p, uint64_t seed) {
  GeneratorOptions gen;
  gen.mode = DataMode::kRandom;
  gen.seed = seed;
  return generate_inputs(p, gen);
}

// The same classifier with a peaked softmax: every row's hidden state points
// at its target, one of 16 tokens (z_t = 20, the rest ~N(0, small)).
HostInputs peaked_inputs(const Problem& p, const HostInputs& flat) {
  HostInputs in = flat;
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t t = (i * 7) % 16;
    in.targets[i] = t;
    double norm2 = 0.0;
    for (int64_t k = 0; k < p.d; ++k) norm2 += static_cast<double>(in.c[t * p.d + k]) * in.c[t * p.d + k];
    for (int64_t k = 0; k < p.d; ++k) in.e[i * p.d + k] = static_cast<float>(20.0 * in.c[t * p.d + k] / norm2);
  }
  round_to_bf16(in.e);
  return in;
}

// A flat softmax (random data) keeps nearly every pair: auto runs the dense
// plan. A peaked one keeps few: every row's hidden state points at its
// target, one of 16 tokens (z_t = 20, the rest ~N(0, small)), so each token
// block needs the one or two tiles those 16 land in: auto runs the sparse
// plan. Each choice is the one --plan would force, with the same outputs.
TEST(PlanPerBatch, PlanFollowsTheKeptShare) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(1100, 192, 30011);
  const std::vector<float> upstream = default_upstream(p, 4);
  const HostInputs flat_batch = random_inputs(p, 21);
  for (const bool flat : {true, false}) {
    const HostInputs in = flat ? flat_batch : peaked_inputs(p, flat_batch);
    const char* what = flat ? "flat" : "peaked";
    const DropRun automatic = run_stage10(p, in, upstream, {"--plan", "auto"});
    const s10::PlanChoice& chosen = automatic.stats.plan;
    ASSERT_GE(chosen.kept_fraction, 0.0) << what << ": auto decided without the kept share";
    if (flat) {
      EXPECT_GT(chosen.kept_fraction, s10::kDenseAboveKept) << "a flat softmax should keep most pairs";
      EXPECT_EQ(chosen.plan, s10::BackwardPlan::kDense);
    } else {
      EXPECT_LT(chosen.kept_fraction, 0.05) << "a peaked softmax should keep few pairs";
      EXPECT_EQ(chosen.plan, s10::BackwardPlan::kSparse);
    }
    // The decision ran after the forward, so the same plan forced there (two calls) gives the same bits.
    const DropRun forced = run_stage10(p, in, upstream, {"--plan", s10::to_string(chosen.plan)}, Calls::kApart);
    EXPECT_EQ(forced.stats.plan.plan, chosen.plan);
    EXPECT_FALSE(automatic.stats.plan.before_forward) << what << ": a first batch has no decision to follow";
    EXPECT_TRUE(forced.out.de == automatic.out.de && forced.out.dc == automatic.out.dc)
        << what << ": auto and --plan " << s10::to_string(chosen.plan) << " differ";
  }
}

// Both plans give the reference's result on the same inputs (odd sizes,
// softcap, ignored tokens, each reduction, both dtypes): the dense one after
// a forward over several slabs whose last is short, before one over several
// chunks of rows whose last is short and over one chunk of every row; and
// each dense plan is bitwise equal over two runs.
TEST(PlanPerBatch, BothPlansMatchTheReference) {
  SKIP_WITHOUT_GPU();
  for (const Dtype dtype : {Dtype::kBFloat16, Dtype::kFloat32})
    for (const Reduction reduction : {Reduction::kMean, Reduction::kSum, Reduction::kNone}) {
      Problem p = bf16_problem(77, 100, 1129);
      p.dtype = dtype;
      p.reduction = reduction;
      p.softcap = reduction == Reduction::kSum ? 30.0f : 0.0f;
      GeneratorOptions gen;
      gen.seed = 8;
      gen.ignore_fraction = 0.1;
      const HostInputs in = generate_inputs(p, gen);
      const std::vector<float> upstream = default_upstream(p, 6);
      const std::string what = std::string(to_string(dtype)) + " " + to_string(reduction);
      const std::vector<const char*> slabs = {"--plan", "dense", "--dense-slab-columns", "300"};
      const DropRun dense = run_stage10(p, in, upstream, slabs, Calls::kApart);
      EXPECT_EQ(dense.stats.plan.plan, s10::BackwardPlan::kDense) << what;
      EXPECT_FALSE(dense.stats.plan.before_forward) << what;
      EXPECT_EQ(dense.stats.plan.slabs.count, 4) << what << ": 1129 columns in slabs of 300";
      expect_exact_reference_check(p, in, dense, upstream, what + ", dense");
      const DropRun again = run_stage10(p, in, upstream, slabs, Calls::kApart);
      EXPECT_TRUE(again.out.de == dense.out.de && again.out.dc == dense.out.dc) << what << ": dense differs over two runs";
      const std::vector<const char*> chunks = {"--plan", "dense", "--dense-chunk-rows", "30"};
      const DropRun before = run_stage10(p, in, upstream, chunks);
      EXPECT_EQ(before.stats.plan.plan, s10::BackwardPlan::kDense) << what;
      EXPECT_TRUE(before.stats.plan.before_forward) << what;
      EXPECT_EQ(before.stats.plan.chunks.count, 3) << what << ": 77 rows in chunks of 30";
      expect_exact_reference_check(p, in, before, upstream, what + ", dense before the forward");
      const DropRun before_again = run_stage10(p, in, upstream, chunks);
      EXPECT_TRUE(before_again.out.loss == before.out.loss && before_again.out.lse == before.out.lse &&
                  before_again.out.de == before.out.de && before_again.out.dc == before.out.dc)
          << what << ": dense before the forward differs over two runs";
      const DropRun one = run_stage10(p, in, upstream, {"--plan", "dense"});
      EXPECT_EQ(one.stats.plan.chunks.count, 1) << what << ": every row in one chunk by default";
      expect_exact_reference_check(p, in, one, upstream, what + ", dense before the forward, one chunk");
      const DropRun one_again = run_stage10(p, in, upstream, {"--plan", "dense"});
      EXPECT_TRUE(one_again.out.de == one.out.de && one_again.out.dc == one.out.dc)
          << what << ": one chunk differs over two runs";
      const DropRun sparse = run_stage10(p, in, upstream, {"--plan", "sparse"});
      EXPECT_EQ(sparse.stats.plan.plan, s10::BackwardPlan::kSparse) << what;
      const CheckReport report =
          check_outputs(p, in, sparse.out, upstream, true, int64_t{1} << 30, 8, sparse.approximation);
      for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << what << ", sparse: " << cmp.summary();
    }
}

// The sparse plan's dense head (--dense-head): the leading tiles that at
// least the share of the token blocks keep, taken whole by cuBLAS. Against
// the same run without a head: the same decision after the head (flags of
// the tiles after it equal), every pair of the head kept; the outputs within
// the sparse plan's declared bound of the reference; the same bits twice.
// V = 3011 ends in a partial tile, D = 100 is no multiple of 8.
TEST(PlanPerBatch, DenseHeadTakesTheLeadingTilesWhole) {
  SKIP_WITHOUT_GPU();
  for (const Reduction reduction : {Reduction::kMean, Reduction::kNone}) {
    for (const char* share : {"0.1", "0.0001"}) {
      Problem p = bf16_problem(1100, 100, 3011);
      p.reduction = reduction;
      p.softcap = reduction == Reduction::kNone ? 30.0f : 0.0f;
      const HostInputs in = seeded_inputs(p, 21, 0.05);
      const std::vector<float> upstream = default_upstream(p, 5);
      const std::string what = std::string(to_string(reduction)) + ", share " + share;
      const DropRun plain = run_stage10(p, in, upstream, {"--plan", "sparse"});
      const DropRun head = run_stage10(p, in, upstream, {"--plan", "sparse", "--dense-head", share});
      ASSERT_EQ(head.stats.plan.plan, s10::BackwardPlan::kSparse) << what;
      const int64_t tiles = (p.v + 127) / 128, blocks = (p.n + 127) / 128;
      const int64_t h = head.stats.plan.head_tiles;
      EXPECT_GE(h, s10::kLeastHeadTiles) << what << ": no head at this share";
      EXPECT_LE(h, tiles) << what;
      EXPECT_EQ(plain.stats.plan.head_tiles, 0) << what;
      ASSERT_EQ(head.flags.size(), static_cast<size_t>(tiles * blocks));
      ASSERT_EQ(plain.flags.size(), head.flags.size());
      for (int64_t t = 0; t < tiles; ++t)
        for (int64_t b = 0; b < blocks; ++b) {
          const size_t k = static_cast<size_t>(t * blocks + b);
          if (t < h)
            EXPECT_EQ(head.flags[k], 1) << what << ": tile " << t << " of the head, block " << b;
          else
            EXPECT_EQ(head.flags[k], plain.flags[k]) << what << ": tile " << t << " after the head, block " << b;
        }
      const CheckReport report =
          check_outputs(p, in, head.out, upstream, true, int64_t{1} << 30, 8, head.approximation);
      for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << what << ": " << cmp.summary();
      const DropRun again = run_stage10(p, in, upstream, {"--plan", "sparse", "--dense-head", share});
      EXPECT_TRUE(again.out.de == head.out.de && again.out.dc == head.out.dc && again.out.loss == head.out.loss)
          << what << ": differs over two runs";
    }
  }
}

// A head wider than one slab (kHeadSlabBytes of logits hold 2560 columns at
// N = 12000; the flat softmax of random inputs keeps nearly every tile): each slab
// adds its share of dE to the slabs' before it. The reference's result
// within the sparse plan's bound, and, closer than that bound (which at a
// flat softmax's eps would pass a lost slab), the run without a head within
// 1% in relative L2; the same bits twice.
TEST(PlanPerBatch, DenseHeadOverSeveralSlabs) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(12000, 100, 3011);
  GeneratorOptions gen;
  gen.mode = DataMode::kRandom;
  gen.seed = 22;
  const HostInputs in = generate_inputs(p, gen);
  const std::vector<float> upstream = default_upstream(p, 6);
  const DropRun head = run_stage10(p, in, upstream, {"--plan", "sparse", "--dense-head", "0.0001"});
  ASSERT_EQ(head.stats.plan.plan, s10::BackwardPlan::kSparse);
  const int64_t head_columns = std::min(head.stats.plan.head_tiles * 128, p.v);
  ASSERT_GT(head_columns, s10::dense_head_slabs(p).columns) << "the head fits in one slab: no test of the adding";
  const CheckReport report = check_outputs(p, in, head.out, upstream, true, int64_t{1} << 30, 8, head.approximation);
  for (const auto& cmp : report.comparisons) EXPECT_TRUE(cmp.passed()) << cmp.summary();
  const DropRun plain = run_stage10(p, in, upstream, {"--plan", "sparse"});
  auto as_double = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  const Comparison de = compare("dE with a head, against none", head.out.de, as_double(plain.out.de), Tolerance{});
  const Comparison dc = compare("dC with a head, against none", head.out.dc, as_double(plain.out.dc), Tolerance{});
  EXPECT_LT(de.rel_l2_error, 1e-2) << de.summary();
  EXPECT_LT(dc.rel_l2_error, 1e-2) << dc.summary();
  const DropRun again = run_stage10(p, in, upstream, {"--plan", "sparse", "--dense-head", "0.0001"});
  EXPECT_TRUE(again.out.de == head.out.de && again.out.dc == head.out.dc) << "differs over two runs";
}

// A frequent token: hundreds of rows whose target terms S_it·E_i go into one
// run of target_rows_kernel (its warps over the rows). A D over 256 columns
// (264) and one not a multiple of 8 (100), in one chunk (the targets' rows from
// their own fp32 product) and in chunks of 300 rows (dC's fp32 accumulator):
// the reference's result, the same bits twice.
TEST(PlanPerBatch, LongRunsOfOneTargetInTheDenseChunks) {
  SKIP_WITHOUT_GPU();
  for (const int64_t d : {int64_t{264}, int64_t{100}}) {
    const Problem p = bf16_problem(700, d, 1129);
    GeneratorOptions gen;
    gen.seed = 12;
    gen.ignore_fraction = 0.05;
    HostInputs in = generate_inputs(p, gen);
    for (size_t i = 0; i < in.targets.size(); ++i)  // runs of about 530 and 130 rows
      if (in.targets[i] != p.ignore_index) in.targets[i] = i % 5 == 4 ? 1128 : 7;
    const std::vector<float> upstream = default_upstream(p, 9);
    for (const bool chunked : {false, true}) {
      std::vector<const char*> flags = {"--plan", "dense"};
      if (chunked) flags.insert(flags.end(), {"--dense-chunk-rows", "300"});
      const std::string what = "D = " + std::to_string(d) + (chunked ? ", chunks of 300 rows" : ", one chunk");
      const DropRun run = run_stage10(p, in, upstream, flags);
      EXPECT_EQ(run.stats.plan.plan, s10::BackwardPlan::kDense) << what;
      EXPECT_EQ(run.stats.plan.target_rows.runs, 2) << what;
      if (chunked) {
        EXPECT_EQ(run.stats.plan.target_rows.whole, 2) << what << ": dC's fp32 accumulator sums them whole";
      }
      expect_exact_reference_check(p, in, run, upstream, what);
      const DropRun again = run_stage10(p, in, upstream, flags);
      EXPECT_TRUE(again.out.de == run.out.de && again.out.dc == run.out.dc) << what << ": differs over two runs";
    }
  }
}

// dC's row of a frequent token on a peaked softmax: every row gives the token
// about half its softmax and half the rows have it as target, with rows of E
// near one direction, so that Σ_i g_i·p_i7·E_i and the target terms
// Σ_{t_i = 7} g_i·(−1)·E_i nearly cancel (asserted: the row is under a tenth
// of its non-target part). The one chunk sums such a row whole in fp32 (its
// product part is over a quarter of it) and rounds it once: the row's error stays within 4× that of the sparse
// plan keeping every pair (S rounded per entry, as eager PyTorch rounds its
// gradient; 3.0× on an H200 with the target's term inside Q's product, where
// α_i·E_i's rounding adds up over rows this alike). Adding the target terms to
// a dC already rounded made it 33×.
double dense_row_error(const Problem& p, const HostInputs& in, const std::vector<float>& upstream,
                       const std::vector<float>& dc, int64_t token, double* non_target_norm) {
  const int64_t n_valid = count_valid_targets(p, in.targets);
  std::vector<double> ref(static_cast<size_t>(p.d), 0.0), non_target(static_cast<size_t>(p.d), 0.0), z(p.v);
  for (int64_t i = 0; i < p.n; ++i) {
    const int64_t t = in.targets[i];
    const double g = upstream_for_token(p, upstream, n_valid, i, t);
    if (g == 0.0) continue;
    const double prob = std::exp(z[token] - row_logits(p, in, i, z));
    for (int64_t k = 0; k < p.d; ++k) {
      ref[k] += g * (prob - (t == token ? 1.0 : 0.0)) * in.e[i * p.d + k];
      if (t != token) non_target[k] += g * prob * in.e[i * p.d + k];
    }
  }
  double diff = 0.0, norm = 0.0, part = 0.0;
  for (int64_t k = 0; k < p.d; ++k) {
    diff += std::pow(dc[token * p.d + k] - ref[k], 2);
    norm += ref[k] * ref[k];
    part += non_target[k] * non_target[k];
  }
  *non_target_norm = std::sqrt(part / norm);
  return std::sqrt(diff / norm);
}

TEST(PlanPerBatch, DenseChunksRoundAFrequentTokensDcOnce) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(700, 128, 1129);
  constexpr int64_t kToken = 7;
  HostInputs in = seeded_inputs(p, 31);
  std::vector<float> direction(static_cast<size_t>(p.d));
  for (int64_t k = 0; k < p.d; ++k) direction[k] = k % 2 == 0 ? 1.0f : -1.0f;  // |direction|² = D
  for (int64_t i = 0; i < p.n; ++i) {
    for (int64_t k = 0; k < p.d; ++k) in.e[i * p.d + k] = direction[k] + 0.05f * in.e[i * p.d + k];
    if (i % 2 == 0) in.targets[i] = kToken;
  }
  // z_i7 ≈ log(V − 1): the token holds about half of each row's softmax.
  const float scale = static_cast<float>(std::log(static_cast<double>(p.v - 1)) / static_cast<double>(p.d));
  for (int64_t k = 0; k < p.d; ++k) in.c[kToken * p.d + k] = scale * direction[k];
  for (int64_t j = 0; j < p.v; ++j)
    if (j != kToken)
      for (int64_t k = 0; k < p.d; ++k) in.c[j * p.d + k] *= 0.05f;
  round_to_bf16(in.e);
  round_to_bf16(in.c);
  const std::vector<float> upstream = default_upstream(p, 5);
  const DropRun dense = run_stage10(p, in, upstream, {"--plan", "dense"});
  ASSERT_TRUE(dense.stats.plan.before_forward);
  ASSERT_EQ(dense.stats.plan.chunks.count, 1) << "one chunk: dC rounded by its product";
  EXPECT_GE(dense.stats.plan.target_rows.whole, 1) << "no target row summed whole";
  const DropRun exact = run_stage10(p, in, upstream, {"--plan", "sparse", "--keep-all"});
  double cancel = 0.0;
  const double dense_error = dense_row_error(p, in, upstream, dense.out.dc, kToken, &cancel);
  const double exact_error = dense_row_error(p, in, upstream, exact.out.dc, kToken, &cancel);
  ASSERT_GT(cancel, 10.0) << "the row's parts do not cancel: the test shows nothing";
  EXPECT_LT(dense_error, 4.0 * exact_error + 1e-6)
      << "dense chunk " << dense_error << ", sparse keeping all " << exact_error << " (cancellation " << cancel << "×)";
  std::printf("frequent token's dC row: relative L2 error dense chunk %.3g, sparse keeping all %.3g; "
              "the row is 1/%.0f of its non-target part; %lld of %lld target rows summed whole\n", dense_error,
              exact_error, cancel, static_cast<long long>(dense.stats.plan.target_rows.whole),
              static_cast<long long>(dense.stats.plan.target_rows.runs));
}

// The chunks keep bf16 inputs' logits as q = exp(z − R_i)·softcap' against the
// row's target logit R_i, and declare the scaled rows' rounding. Each row's
// logits here sit on a common offset (column 0 of C all 1, E_i0 the offset:
// the softmax is the same): at 1000 and at ±2^17 (beyond fp16's range) q
// stays finite and the gradient agrees with the reference (at 1000) and with
// the slabs' (fp32 logits by cuBLAS, themselves off by a few hundredths at
// 2^17).
// On a flat softmax (random inputs: p_it near 1/V) the target's term dominates
// its rows of dE and dC; the dense chunks must not round it beyond S's own
// rounding: their relative L2 errors within 1.3× those of the dense plan after a
// forward, which makes S in fp32 and rounds it once (eager's arithmetic). No
// target row's product part is a quarter of it: none is summed whole.
// Rounded through Q's target entry (about −V) and α_i·E_i they were 1.4× (dE) and
// 3.5× (dC) eager's at gemma2_flat on an H200.
double relative_l2(const std::vector<float>& x, const std::vector<double>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t k = 0; k < ref.size(); ++k) diff += std::pow(x[k] - ref[k], 2), norm += ref[k] * ref[k];
  return std::sqrt(diff / norm);
}

TEST(PlanPerBatch, DenseChunksKeepAFlatRowsTargetTermExact) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(512, 128, 8003);
  const HostInputs in = random_inputs(p, 41);
  const std::vector<float> upstream = default_upstream(p, 7);
  ReferenceOptions options;
  options.backward = true;
  options.upstream = upstream;
  const ReferenceResult ref = reference_cross_entropy(p, in, options);
  const DropRun chunks = run_stage10(p, in, upstream, {"--plan", "dense"});
  ASSERT_TRUE(chunks.stats.plan.before_forward);
  EXPECT_GT(chunks.stats.plan.target_rows.runs, 400) << "random targets: about 500 tokens";
  EXPECT_EQ(chunks.stats.plan.target_rows.whole, 0) << "a flat row's product part is far below its target terms";
  const DropRun slabs = run_stage10(p, in, upstream, {"--plan", "dense"}, Calls::kApart);
  ASSERT_FALSE(slabs.stats.plan.before_forward);
  const double de_chunks = relative_l2(chunks.out.de, ref.de), de_slabs = relative_l2(slabs.out.de, ref.de);
  const double dc_chunks = relative_l2(chunks.out.dc, ref.dc), dc_slabs = relative_l2(slabs.out.dc, ref.dc);
  EXPECT_LT(de_chunks, 1.3 * de_slabs) << "dE: chunks " << de_chunks << ", slabs " << de_slabs;
  EXPECT_LT(dc_chunks, 1.3 * dc_slabs) << "dC: chunks " << dc_chunks << ", slabs " << dc_slabs;
  std::printf("flat softmax, relative L2: dE chunks %.3g slabs %.3g; dC chunks %.3g slabs %.3g\n", de_chunks, de_slabs,
              dc_chunks, dc_slabs);
}

TEST(PlanPerBatch, ScaledLogitsHoldLargeLogits) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(77, 128, 1129);  // D % 8 == 0: the H100's pipeline (D = 100 above: mma.sync)
  const std::vector<float> upstream = default_upstream(p, 7);
  for (const float offset : {1000.0f, 131072.0f, -131072.0f}) {
    HostInputs in = seeded_inputs(p, 9, 0.1);
    for (int64_t j = 0; j < p.v; ++j) in.c[j * p.d] = 1.0f;
    for (int64_t i = 0; i < p.n; ++i) in.e[i * p.d] = offset;  // exact in bf16
    const std::string what = "logits about " + std::to_string(offset);
    const DropRun chunks = run_stage10(p, in, upstream, {"--plan", "dense", "--dense-chunk-rows", "30"});
    ASSERT_TRUE(chunks.stats.plan.before_forward) << what;
    ASSERT_EQ(chunks.stats.plan.chunks.logit_bytes, 2) << what << ": bf16 inputs: q in bf16";
    EXPECT_EQ(chunks.approximation.scaled_rows_rounding, kBf16Unit) << what;
    if (std::fabs(offset) < 65504.0f) {
      expect_exact_reference_check(p, in, chunks, upstream, what);
      continue;
    }
    const DropRun slabs = run_stage10(p, in, upstream, {"--plan", "dense", "--dense-slab-columns", "300"});
    double largest = 0.0, difference = 0.0;
    for (size_t k = 0; k < slabs.out.de.size(); ++k) {
      ASSERT_TRUE(std::isfinite(chunks.out.de[k])) << what << ": dE[" << k << "]";
      largest = std::max(largest, std::fabs(static_cast<double>(slabs.out.de[k])));
      difference = std::max(difference, std::fabs(static_cast<double>(chunks.out.de[k]) - slabs.out.de[k]));
    }
    EXPECT_GT(largest, 0.0) << what;
    EXPECT_LE(difference, 0.25 * largest) << what << ": the chunks' dE is not the slabs'";
  }
}

// A row whose target logit lies more than e^88 below the row's largest (its
// loss above 100 nats) would overflow q = exp(z − z_t): the chunk runs again
// with R_i = LSE_i, and the result is the reference's. Rows 0 and 40 get
// their target's logit 100 below the rest (E_i1 = 100, C_t1 = −1 for their
// targets; column 1 is 0 elsewhere); the other rows keep theirs.
TEST(PlanPerBatch, FarTargetsRunTheChunkAgainstTheLse) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(77, 128, 1129);
  const std::vector<float> upstream = default_upstream(p, 7);
  HostInputs in = seeded_inputs(p, 11, 0.1);
  for (int64_t j = 0; j < p.v; ++j) in.c[j * p.d + 1] = 0.0f;
  for (int64_t i = 0; i < p.n; ++i) in.e[i * p.d + 1] = 0.0f;
  for (const int64_t i : {int64_t{0}, int64_t{40}}) {
    in.targets[i] = 7 + i;  // two targets of their own
    in.c[in.targets[i] * p.d + 1] = -1.0f;
    in.e[i * p.d + 1] = 100.0f;
  }
  const DropRun chunks = run_stage10(p, in, upstream, {"--plan", "dense", "--dense-chunk-rows", "30"});
  ASSERT_TRUE(chunks.stats.plan.before_forward);
  expect_exact_reference_check(p, in, chunks, upstream, "targets 100 below their rows");
  for (size_t k = 0; k < chunks.out.dc.size(); ++k) ASSERT_TRUE(std::isfinite(chunks.out.dc[k])) << "dC[" << k << "]";
}

// A forced dense plan decides no eps: after a sparse run on the same stage
// object, the report shows neither that run's automatic eps nor its
// candidates.
TEST(PlanPerBatch, ForcedDenseReportsNoEps) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 128, 16411);
  const HostInputs in = seeded_inputs(p, 5);
  const std::vector<float> upstream = default_upstream(p, 1);
  s10::PlanPerBatchStage stage;
  run_with(stage, p, in, upstream, {"--plan", "sparse"});
  ASSERT_GE(stage.eps_choice().misplaced_mass, 0.0) << "the sparse run chose no automatic eps";
  run_with(stage, p, in, upstream, {"--plan", "dense"});
  EXPECT_LT(stage.eps_choice().misplaced_mass, 0.0);
  const std::vector<std::string> lines = stage.report_lines();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1], "drop         none: --plan dense recomputes every pair");
  for (const std::string& line : lines) EXPECT_NE(line.rfind("candidates", 0), size_t{0}) << line;
}

// Stage 10's flags, parsed as its executable parses them.
void set_flags(s10::PlanPerBatchStage& stage, std::vector<const char*> flags) {
  OptionParser parser(stage.name());
  stage.add_options(parser);
  flags.insert(flags.begin(), "stage");
  ASSERT_TRUE(parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data())));
}

// The dense plan's slab is in the memory model once it ran, and the peak is the model.
TEST(PlanPerBatch, DenseSlabIsInTheMemoryModel) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 64, 5000);
  const HostInputs in = random_inputs(p, GeneratorOptions{}.seed);
  s10::PlanPerBatchStage stage;
  set_flags(stage, {"--plan", "dense", "--dense-slab-columns", "1024"});
  const size_t before = total_bytes(stage.workspace(p, true));
  StageRunner runner(stage, p, in, default_upstream(p, 1));
  runner.forward_then_backward();  // the slabs are the plan after a forward
  runner.synchronize();
  const std::vector<MemoryItem> model = runner.memory_model(true);
  EXPECT_EQ(total_bytes(stage.workspace(p, true)) - before, static_cast<size_t>(p.n + p.d) * 1024 * 4)
      << "the slab, N rows of 1024 fp32 logits, and the slab's bf16 dC in fp32, 1024 rows of D";
  EXPECT_EQ(runner.peak_beyond_inputs(), total_bytes(model));
}

// Before the forward, the dense plan allocates only its own items: the chunk
// of logits, the grad scale, the per-token losses and (bf16) dE's rows and
// dC's accumulator in fp32; the peak is the model.
TEST(PlanPerBatch, DenseChunksAreInTheMemoryModel) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 64, 5000);
  const HostInputs in = random_inputs(p, GeneratorOptions{}.seed);
  s10::PlanPerBatchStage stage;
  set_flags(stage, {"--plan", "dense", "--dense-chunk-rows", "128"});
  StageRunner runner(stage, p, in, default_upstream(p, 1));
  runner.forward_backward();
  runner.synchronize();
  ASSERT_TRUE(stage.plan_choice().before_forward);
  const s10::DenseChunks chunks = stage.plan_choice().chunks;
  EXPECT_EQ(chunks.rows, 128);
  EXPECT_EQ(chunks.count, 3) << "300 rows in chunks of 128";
  EXPECT_EQ(chunks.pitch, 5056) << "5000 logits padded to 64";
  EXPECT_EQ(chunks.logit_bytes, 2) << "bf16 inputs: q in bf16";
  const std::vector<MemoryItem> items = stage.workspace(p, true);
  EXPECT_EQ(total_bytes(items), total_bytes(s10::dense_chunk_items(p, chunks, true)));
  auto bytes_of = [&](const std::string& name) {
    for (const MemoryItem& item : items)
      if (item.first == name) return item.second;
    ADD_FAILURE() << "no item " << name;
    return size_t{0};
  };
  EXPECT_EQ(bytes_of(s10::kDenseChunkItem), size_t{128} * 5056 * 2);
  EXPECT_EQ(bytes_of(s10::kDenseScaledRowsItem), size_t{128} * 64 * 2) << "a chunk's rows of E times alpha, bf16";
  EXPECT_EQ(bytes_of(s10::kDenseDcItem), size_t{5000} * 64 * 4);
  EXPECT_EQ(bytes_of(s10::kDenseDeRowsItem), size_t{128} * 64 * 4);
  EXPECT_EQ(bytes_of(s10::kDenseGradScaleItem), size_t{300} * 4);
  EXPECT_EQ(runner.peak_beyond_inputs(), total_bytes(runner.memory_model(true)));
}

// One chunk of every row (the default when the logits fit the budget): dC
// comes from one cuBLASLt product, bf16 rounded once, with no fp32
// accumulator; its workspace is in the model, and the result is the
// reference's (and the same as several chunks' up to dC's rounding).
TEST(PlanPerBatch, OneDenseChunkWritesDcInItsProduct) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(300, 64, 5000);
  const HostInputs in = random_inputs(p, GeneratorOptions{}.seed);
  s10::PlanPerBatchStage stage;
  set_flags(stage, {"--plan", "dense"});
  StageRunner runner(stage, p, in, default_upstream(p, 1));
  runner.forward_backward();
  runner.synchronize();
  ASSERT_TRUE(stage.plan_choice().before_forward);
  EXPECT_EQ(stage.plan_choice().chunks.count, 1);
  bool workspace = false;
  for (const MemoryItem& item : stage.workspace(p, true)) {
    EXPECT_NE(item.first, s10::kDenseDcItem) << "one chunk: no fp32 accumulator";
    if (item.first == s10::kDenseDcWorkspaceItem) workspace = item.second == kCublasWorkspaceBytes;
  }
  EXPECT_TRUE(workspace) << "the product's workspace is in the model";
  EXPECT_EQ(runner.peak_beyond_inputs(), total_bytes(runner.memory_model(true)));
}

// In auto, a batch decided dense plans the next ones of the same problem
// dense before their forward, until the kDecideEveryBatches-th, which
// decides again on a sample of its rows: here the batches turned peaked
// meanwhile, so it and the next run the sparse plan. Every dense batch
// matches the reference.
TEST(PlanPerBatch, DenseBeforeTheForwardFollowsTheLastDecision) {
  SKIP_WITHOUT_GPU();
  const Problem p = bf16_problem(1100, 192, 30011);
  const std::vector<float> upstream = default_upstream(p, 4);
  const HostInputs flat = random_inputs(p, 21);
  const HostInputs peaked = peaked_inputs(p, flat);
  s10::PlanPerBatchStage stage;
  run_with(stage, p, flat, upstream, {});
  ASSERT_EQ(stage.plan_choice().plan, s10::BackwardPlan::kDense);
  ASSERT_FALSE(stage.plan_choice().before_forward);
  const double decided = stage.plan_choice().kept_fraction;
  const DropRun second = run_with(stage, p, flat, upstream, {});
  EXPECT_TRUE(stage.plan_choice().before_forward) << "the batch after a dense decision";
  EXPECT_EQ(stage.plan_choice().kept_fraction, decided) << "the report names the decision it followed";
  expect_exact_reference_check(p, flat, second, upstream, "the second flat batch, dense before its forward");
  // Batches 3 .. kDecideEveryBatches are peaked: they still follow the decision of batch 1.
  for (int batch = 3; batch <= s10::kDecideEveryBatches; ++batch) {
    const DropRun run = run_with(stage, p, peaked, upstream, {});
    ASSERT_TRUE(stage.plan_choice().before_forward) << "batch " << batch;
    if (batch == 3) expect_exact_reference_check(p, peaked, run, upstream, "a peaked batch on the dense plan");
  }
  run_with(stage, p, peaked, upstream, {});
  EXPECT_FALSE(stage.plan_choice().before_forward) << "batch kDecideEveryBatches + 1 decides again";
  EXPECT_EQ(stage.plan_choice().plan, s10::BackwardPlan::kSparse);
  run_with(stage, p, peaked, upstream, {});
  EXPECT_FALSE(stage.plan_choice().before_forward);
  EXPECT_EQ(stage.plan_choice().plan, s10::BackwardPlan::kSparse) << "the next batch follows the sparse decision";
}

// A run of flat batches: the kDecideEveryBatches-th decides again on a
// sample of rows spread over the batch (every 2nd of 2300 here; reduction
// none, so the per-token upstream is sampled too) and stays dense before its
// forward, matching the reference. The sparse plan's scratch of the first
// batch is released once the dense plan takes over.
TEST(PlanPerBatch, ARunOfDenseBatchesDecidesAgainOnASample) {
  SKIP_WITHOUT_GPU();
  Problem p = bf16_problem(2300, 96, 5003);
  p.reduction = Reduction::kNone;
  const std::vector<float> upstream = default_upstream(p, 5);
  const HostInputs flat = random_inputs(p, 23);
  const s10::RowSample sample = s10::plan_row_sample(p);
  ASSERT_EQ(sample.stride, 2);
  s10::PlanPerBatchStage stage;
  run_with(stage, p, flat, upstream, {});
  ASSERT_EQ(stage.plan_choice().plan, s10::BackwardPlan::kDense);
  ASSERT_FALSE(stage.plan_choice().before_forward) << "the first batch decides on the whole batch";
  for (int batch = 2; batch <= s10::kDecideEveryBatches; ++batch) {
    run_with(stage, p, flat, upstream, {});
    ASSERT_TRUE(stage.plan_choice().before_forward) << "batch " << batch;
    EXPECT_EQ(stage.plan_choice().sample_rows, 0) << "batch " << batch << " follows the first batch's decision";
  }
  const s10::DenseChunks chunks = stage.plan_choice().chunks;
  EXPECT_EQ(total_bytes(stage.workspace(p, true)), total_bytes(s10::dense_chunk_items(p, chunks, true)))
      << "only the dense plan's chunk items stay allocated";
  const DropRun sampled = run_with(stage, p, flat, upstream, {});
  ASSERT_TRUE(stage.plan_choice().before_forward) << "a flat sample stays dense";
  EXPECT_EQ(stage.plan_choice().sample_rows, sample.rows);
  EXPECT_GT(stage.plan_choice().kept_fraction, s10::kDenseAboveKept);
  expect_exact_reference_check(p, flat, sampled, upstream, "the batch that decided on a sample");
  const Problem rows = p.with_tokens(sample.rows);
  EXPECT_EQ(total_bytes(stage.workspace(p, true)),
            total_bytes(s10::dense_chunk_items(p, chunks, true)) +
                total_bytes(s10::sample_items(p, sample, stage.plan_for(rows))))
      << "and the sample's own";
  run_with(stage, p, flat, upstream, {});
  EXPECT_EQ(stage.plan_choice().sample_rows, 0) << "the next batch follows the sample's decision";
}

}  // namespace
}  // namespace cce
