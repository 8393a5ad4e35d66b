// Stage 11's choice of eps and plan from statistics joined across the shards,
// without a GPU: P shards' statistics, joined as the all-reduces join them
// (join_misplaced_mass, join_kept_pairs), give stage 10's choice on one shard
// holding every pair, bit for bit; a shard alone may choose otherwise.
//
// The pairs here are a model of what stage 10's kernels measure: each
// (token block, tile) pair has the smallest candidate eps that drops it
// (its bin, −1: none does) and its misplaced mass in fixed point. The shards
// hold the tiles in contiguous ranges, as stage 11's shards do.
// And the targets each shard's indexed dot takes (ShardTargets).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "stages/11_sharded_vocabulary/sharded_vocabulary.h"

namespace cce::s11 {
namespace {

struct Pair {
  int bin = -1;                 // dropped at candidates 0..bin (eps 2^-8 .. 2^-(8+bin/2)); −1: never
  unsigned long long mass = 0;  // units of 2^-32
};
using Tiles = std::vector<std::vector<Pair>>;  // [tile][token block]

Tiles random_tiles(int tiles, int blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> bin(-1, s10::kAutoCandidates - 1);
  std::uniform_int_distribution<unsigned long long> mass(0, 1ull << 28);  // up to 1/16 per pair
  Tiles out(static_cast<size_t>(tiles), std::vector<Pair>(static_cast<size_t>(blocks)));
  for (auto& tile : out)
    for (Pair& pair : tile) pair = {bin(rng), mass(rng)};
  return out;
}

// What a shard holding tiles [begin, end) measures: stage 10's misplaced mass
// (mass[k] sums the pairs whose bin is k) and, at candidate `chosen`, the kept pairs.
s10::MisplacedMass measure(const Tiles& tiles, size_t begin, size_t end, unsigned long long rows) {
  s10::MisplacedMass m;
  m.rows = rows;
  for (size_t t = begin; t < end; ++t)
    for (const Pair& pair : tiles[t])
      if (pair.bin >= 0) m.mass[static_cast<size_t>(pair.bin)] += pair.mass;
  return m;
}
s10::KeptPairs kept_at(const Tiles& tiles, size_t begin, size_t end, int chosen) {
  s10::KeptPairs k;
  for (size_t t = begin; t < end; ++t)
    for (const Pair& pair : tiles[t]) {
      ++k.pairs;
      if (pair.bin < chosen) ++k.kept;  // not dropped at the chosen candidate
    }
  return k;
}

struct Choice {
  s10::EpsChoice eps;
  s10::PlanChoice plan;
};
// Stage 10's two steps, each from statistics joined over `ranges` (one range: one GPU).
Choice choose(const Tiles& tiles, const std::vector<ShardRange>& ranges, double budget) {
  std::vector<s10::MisplacedMass> masses;
  for (const ShardRange& r : ranges)
    masses.push_back(measure(tiles, static_cast<size_t>(r.begin), static_cast<size_t>(r.end), 77));
  Choice c;
  c.eps = s10::choose_drop_eps(join_misplaced_mass(masses), budget);
  const int chosen = s10::candidate_index(c.eps.eps);
  EXPECT_GE(chosen, 0) << "a candidate's eps, got " << c.eps.eps;
  std::vector<s10::KeptPairs> kept;
  for (const ShardRange& r : ranges)
    kept.push_back(kept_at(tiles, static_cast<size_t>(r.begin), static_cast<size_t>(r.end), chosen));
  c.plan = s10::choose_plan(s10::BackwardPlan::kAuto, join_kept_pairs(kept));
  return c;
}

void expect_same(const Choice& a, const Choice& b, const std::string& what) {
  EXPECT_EQ(a.eps.eps, b.eps.eps) << what;
  EXPECT_EQ(a.eps.misplaced_mass, b.eps.misplaced_mass) << what << ": not bitwise";
  EXPECT_EQ(a.eps.candidates, b.eps.candidates) << what << ": not bitwise";
  EXPECT_EQ(a.plan.plan, b.plan.plan) << what;
  EXPECT_EQ(a.plan.kept_fraction, b.plan.kept_fraction) << what << ": not bitwise";
}

TEST(ShardChoice, JoinedShardsChooseAsOneShardHoldingEverything) {
  for (const int tiles : {9, 10, 2000}) {
    const Tiles pairs = random_tiles(tiles, 3, static_cast<uint64_t>(tiles));
    for (const double budget : {0.025, 0.001, 0.2}) {
      const Choice one = choose(pairs, shard_vocabulary(tiles, 1), budget);
      for (const int shards : {2, 3, 8}) {
        if (shards > tiles) continue;
        std::vector<ShardRange> ranges = shard_vocabulary(tiles, shards);
        const std::string what = std::to_string(tiles) + " tiles on " + std::to_string(shards) + " shards, budget " +
                                 std::to_string(budget);
        expect_same(choose(pairs, ranges, budget), one, what);
        std::reverse(ranges.begin(), ranges.end());  // the sums in another order: integers, the same
        expect_same(choose(pairs, ranges, budget), one, what + ", shards reversed");
      }
    }
  }
}

// The rows with a gradient are every shard's rows, the same on each: the
// first shard's, not their sum (a sum would halve the mass per row on two GPUs).
TEST(ShardChoice, RowsAreNotSummed) {
  s10::MisplacedMass a, b;
  a.rows = b.rows = 77;
  a.mass[0] = 5, b.mass[0] = 7, b.mass[3] = 1;
  const s10::MisplacedMass joined = join_misplaced_mass({a, b});
  EXPECT_EQ(joined.rows, 77u);
  EXPECT_EQ(joined.mass[0], 12u);
  EXPECT_EQ(joined.mass[3], 1u);
  const s10::KeptPairs kept = join_kept_pairs({{3, 10}, {4, 12}});
  EXPECT_EQ(kept.kept, 7);
  EXPECT_EQ(kept.pairs, 22);
}

// Why the statistics are joined: each shard alone would choose otherwise.
// Eps: each shard misplaces 0.015 per row at 2^-8, within a budget of 0.025;
// the rows' whole softmax 0.03 there, beyond it: the joined choice is the next
// candidate, 2^-8.25.
// Plan: one shard keeps 5 of 6 pairs (dense alone), the other 0 of 12: 5 of
// 18 kept, under a third: sparse.
TEST(ShardChoice, EachShardAloneWouldChooseOtherwise) {
  const unsigned long long rows = 100;
  s10::MisplacedMass shard;
  shard.rows = rows;
  shard.mass[0] = static_cast<unsigned long long>(0.015 * 4294967296.0 * rows);
  EXPECT_EQ(s10::choose_drop_eps(shard, 0.025).eps, std::ldexp(1.0f, -8));
  const s10::EpsChoice joined = s10::choose_drop_eps(join_misplaced_mass({shard, shard}), 0.025);
  EXPECT_EQ(joined.eps, s10::candidate_eps(1));
  EXPECT_EQ(s10::candidate_log2_eps(1), -8.25);
  EXPECT_NEAR(joined.candidates[0], 0.03, 1e-9);

  EXPECT_EQ(s10::choose_plan(s10::BackwardPlan::kAuto, {5, 6}).plan, s10::BackwardPlan::kDense);
  EXPECT_EQ(s10::choose_plan(s10::BackwardPlan::kAuto, {0, 12}).plan, s10::BackwardPlan::kSparse);
  const s10::PlanChoice plan = s10::choose_plan(s10::BackwardPlan::kAuto, join_kept_pairs({{5, 6}, {0, 12}}));
  EXPECT_EQ(plan.plan, s10::BackwardPlan::kSparse);
  EXPECT_DOUBLE_EQ(plan.kept_fraction, 5.0 / 18.0);
  // A forced plan stays, whatever was kept.
  EXPECT_EQ(s10::choose_plan(s10::BackwardPlan::kSparse, {18, 18}).plan, s10::BackwardPlan::kSparse);
  EXPECT_EQ(s10::choose_plan(s10::BackwardPlan::kDense, {0, 18}).plan, s10::BackwardPlan::kDense);
}

// The dense plan before the forward takes each row's target logit R_i as the
// sum over the shards of their indexed dots (stage 04's, 0 for an ignored
// target): with targets_for_dot every valid target is dotted on exactly one
// shard, at its own row of that shard, and an ignored one on none. Then the
// sum is the target logit and the other shards add exact zeros.
TEST(ShardTargets, EachTargetIsDottedOnItsShardAlone) {
  Problem p;
  p.n = 200, p.d = 4, p.v = 1129, p.ignore_index = -100;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> token(0, p.v - 1);
  std::vector<int64_t> targets(static_cast<size_t>(p.n));
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = i % 7 == 3 ? p.ignore_index : token(rng);
  targets[0] = 0, targets[1] = p.v - 1;  // the first and last rows of C
  for (int shards : {1, 2, 3, 5}) {
    const std::vector<ShardRange> ranges = shard_vocabulary(p.v, shards);
    std::vector<int> dotted(targets.size(), 0);
    for (const ShardRange& range : ranges) {
      const std::vector<int64_t> dot = targets_for_dot(p, targets, range);
      const std::vector<int64_t> local = shard_targets(p, targets, range);
      ASSERT_EQ(dot.size(), targets.size());
      for (size_t i = 0; i < targets.size(); ++i) {
        const int64_t t = targets[i];
        const bool here = t != p.ignore_index && t >= range.begin && t < range.end;
        if (here) {
          EXPECT_EQ(dot[i], t - range.begin) << "row " << i << ", " << shards << " shards";
          ++dotted[i];
        } else {
          EXPECT_EQ(dot[i], p.ignore_index) << "row " << i << " (target " << t << ") on shard [" << range.begin
                                            << ", " << range.end << ")";
        }
        // Where the dot differs from the shard's own view of the target: only for a target on another shard.
        if (dot[i] != local[i]) {
          EXPECT_EQ(local[i], range.rows()) << "row " << i;
        }
      }
    }
    for (size_t i = 0; i < targets.size(); ++i)
      EXPECT_EQ(dotted[i], targets[i] == p.ignore_index ? 0 : 1) << "row " << i << ", " << shards << " shards";
  }
}

}  // namespace
}  // namespace cce::s11
