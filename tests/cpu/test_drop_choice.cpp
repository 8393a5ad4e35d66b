// The drop stages' host-side choices, without a GPU: stage 08's tile grid,
// default eps, forward plan and kept-pair list; stage 10's automatic eps's
// pick from the measured misplaced masses (the default budget, the boundary, the
// fallback), the settings its flags give and where it copies E's rows for
// dC's owners; stage 09's plan sizes (where the dC tail sums live) and where
// S lies in a slot (s_index), against the shared-memory layouts the owners'
// wgmma reads.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/options.h"
#include "stages/09_deterministic_products/slot_layout.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

// misplaced[k]: the misplaced mass per row at eps = 2^-(8 + k/4), falling as eps does.
void fill(double (&misplaced)[kAutoCandidates], std::vector<double> values) {
  ASSERT_EQ(values.size(), static_cast<size_t>(kAutoCandidates));
  for (int k = 0; k < kAutoCandidates; ++k) misplaced[k] = values.at(static_cast<size_t>(k));
}

TEST(DropChoice, LargestEpsWithinTheBudgetInclusive) {
  double misplaced[kAutoCandidates];
  fill(misplaced, {0.2,   0.17,   0.15,   0.12,   0.1,    0.085,  0.07,   0.06,   0.05,   0.045,
                   0.04,  0.035,  0.03,   0.029,  0.028,  0.026,  0.025,  0.022,  0.02,   0.015,
                   0.01,  0.008,  0.007,  0.006,  0.005,  0.003,  0.002,  0.0015, 0.001,  0.0009,
                   0.0008, 0.0006, 0.0005, 0.0003, 0.0002, 0.0001, 0.0});
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.025), 16);   // 0.025 ≤ 0.025: 2^-12
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.0249), 17);  // 2^-12.25
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.2), 0);      // the first candidate already within
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.03), 12);
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.0007), 31);
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.00005), 36);  // the last candidate, within
}

// The candidates: 2^-8, 2^-8.25, …, 2^-17, each eps exact where it is a power of
// two, else the float nearest 2^-(8 + k/4), falling, and their log2.
TEST(DropChoice, CandidatesAQuarterExponentApart) {
  EXPECT_EQ(kAutoCandidates, 37);
  for (int k = 0; k < kAutoCandidates; ++k) {
    EXPECT_EQ(candidate_log2_eps(k), -8.0 - 0.25 * k);
    EXPECT_EQ(candidate_eps(k), static_cast<float>(std::exp2(candidate_log2_eps(k)))) << "candidate " << k;
    if (k > 0) {
      EXPECT_LT(candidate_eps(k), candidate_eps(k - 1));
    }
    EXPECT_EQ(candidate_index(candidate_eps(k)), k);
  }
  EXPECT_EQ(candidate_index(0.001f), -1);
  EXPECT_EQ(candidate_index(std::nextafter(candidate_eps(3), 1.0f)), -1) << "bit for bit";
  EXPECT_EQ(candidate_eps(0), 0x1p-8f);
  EXPECT_EQ(candidate_eps(kAutoCandidates - 1), std::ldexp(1.0f, -kAutoLastExponent));
  EXPECT_EQ(describe_eps(candidate_eps(17)), "eps 2^-12.25");
  EXPECT_EQ(describe_eps(candidate_eps(18)), "eps 2^-12.5");
  EXPECT_EQ(describe_eps(candidate_eps(kAutoCandidates - 2)), "eps 2^-16.75");
  EXPECT_EQ(describe_eps(candidate_eps(20)), "eps 2^-13") << "a power of two: stage 08's words";
  EXPECT_EQ(describe_eps(0.001f), s08::describe_eps(0.001f));
  // The report's words for them (stage 11's expected report text matches "2.-8, 2.-8.25..2.-17").
  EpsChoice choice;
  choice.misplaced_mass = 0.02;
  const std::string line = describe_candidates(choice);
  EXPECT_EQ(line.rfind("candidates   misplaced mass per row at eps 2^-8, 2^-8.25..2^-17:", 0), 0u) << line;
  const std::string masses = line.substr(line.find(':') + 1);
  EXPECT_EQ(std::count(masses.begin(), masses.end(), ' '), kAutoCandidates) << line;  // " %.4f" each
  EXPECT_NE(describe_automatic_eps(choice, 0.022).find("the largest of 2^-8, 2^-8.25..2^-17 whose"), std::string::npos);
}

// The correction's misplaced mass: none for a flat tile, all but a share for
// one entry holding the mass, half for half the entries at p_max, and never
// below 0 (a mass the statistics' rounding lifts above |T|·p_max).
TEST(DropChoice, MisplacedMassBound) {
  const float p_max = 0x1p-10f, entries = 128.0f;
  EXPECT_EQ(misplaced_mass_bound(entries * p_max, entries, p_max), 0.0f);
  EXPECT_FLOAT_EQ(misplaced_mass_bound(p_max, entries, p_max), p_max * (1.0f - 1.0f / 128.0f));
  EXPECT_FLOAT_EQ(misplaced_mass_bound(64.0f * p_max, entries, p_max), 32.0f * p_max);
  EXPECT_EQ(misplaced_mass_bound(1.01f * entries * p_max, entries, p_max), 0.0f);
  EXPECT_EQ(misplaced_mass_bound(0.0f, entries, p_max), 0.0f);
  EXPECT_EQ(misplaced_mass_bound(0.0f, 27.0f, 0.0f), 0.0f) << "a tile of no mass (0/0): nothing misplaced";
  EXPECT_FLOAT_EQ(misplaced_mass_bound(13.5f * p_max, 27.0f, p_max), 6.75f * p_max) << "the last tile's own width";
}

TEST(DropChoice, NoCandidateWithinTheBudgetFallsBackToTheSmallestEps) {
  double misplaced[kAutoCandidates];
  fill(misplaced, {0.9,  0.88, 0.85, 0.83, 0.8,  0.78, 0.75, 0.73, 0.7,  0.68, 0.65, 0.63, 0.6,  0.58, 0.55, 0.53,
                   0.5,  0.48, 0.45, 0.43, 0.4,  0.38, 0.35, 0.33, 0.3,  0.28, 0.25, 0.23, 0.2,  0.18, 0.15, 0.13,
                   0.1,  0.09, 0.07, 0.06, 0.05});
  EXPECT_EQ(choose_drop_candidate(misplaced, 0.025), kAutoCandidates - 1);
  EXPECT_EQ(kAutoLastExponent, 17);
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
  EXPECT_EQ(bf16.misplaced_mass, 0.022) << "bf16's default: the automatic eps within 0.022";
  EXPECT_EQ(bf16.misplaced_mass, kDefaultMisplacedMass);
  EXPECT_EQ(bf16.eps, std::ldexp(1.0f, -kAutoFirstExponent));
  EXPECT_TRUE(bf16.correct_tail && bf16.correct_dc && bf16.group_tokens);
  const DropSettings fp32 = settings_from({}, Dtype::kFloat32);
  EXPECT_EQ(fp32.misplaced_mass, 0.0) << "fp32 keeps a fixed eps";
  EXPECT_EQ(fp32.eps, s08::default_drop_eps(Dtype::kFloat32));
  EXPECT_EQ(settings_from({"--misplaced-mass", "0.01"}, Dtype::kBFloat16).misplaced_mass, 0.01);
  const DropSettings fixed = settings_from({"--drop-eps", "0.001"}, Dtype::kBFloat16);
  EXPECT_EQ(fixed.misplaced_mass, 0.0);
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

TEST(DropChoice, Stage08TileGridAndEps) {
  const s08::TileGrid bf16 = s08::tile_grid(problem(300, 128, 16411, Dtype::kBFloat16));
  EXPECT_EQ(bf16.tile_rows, 128);
  EXPECT_EQ(bf16.tile_cols, 128);
  EXPECT_EQ(bf16.tiles, 129);  // ⌈16411 / 128⌉: the partial last tile counts
  EXPECT_EQ(bf16.token_blocks, 3);  // ⌈300 / 128⌉
  EXPECT_EQ(bf16.pairs(), 387);
  const s08::TileGrid fp32 = s08::tile_grid(problem(77, 100, 1129, Dtype::kFloat32));
  EXPECT_EQ(fp32.tile_cols, 64);
  EXPECT_EQ(fp32.tiles, 18);
  EXPECT_EQ(fp32.token_blocks, 2);
  EXPECT_EQ(s08::default_drop_eps(Dtype::kBFloat16), std::ldexp(1.0f, -8));
  EXPECT_EQ(s08::default_drop_eps(Dtype::kFloat32), std::ldexp(1.0f, -28));
  EXPECT_EQ(s08::describe_eps(0.0f), "off (every tile kept)");
  EXPECT_EQ(s08::describe_eps(std::ldexp(1.0f, -8)), "eps 2^-8");
  EXPECT_EQ(s08::describe_eps(0.003f).rfind("eps 0.003", 0), 0u) << s08::describe_eps(0.003f);
}

TEST(DropChoice, Stage08ForwardPlan) {
  // By default the forward gathers 64 MiB of C at once, whole multiples of 256 rows, at most V.
  const Problem gemma2 = problem(8192, 2304, 256000, Dtype::kBFloat16);
  const s08::SortedForwardPlan big = s08::plan_sorted_forward(gemma2);
  EXPECT_EQ(big.chunk_rows, 14336);  // ⌊64 MiB / 4608 B / 256⌋ · 256
  EXPECT_GE(big.ranges, 1);
  EXPECT_GE(big.work_bytes, static_cast<size_t>(big.chunk_rows) * 2304 * 2);
  EXPECT_GE(big.work_bytes, s08::sort_work_bytes(256000));
  const Problem small = problem(300, 128, 16411, Dtype::kBFloat16);
  EXPECT_EQ(s08::plan_sorted_forward(small).chunk_rows, 16411) << "a chunk never holds more than V rows";
  EXPECT_EQ(s08::plan_sorted_forward(small, 4096).chunk_rows, 4096) << "--chunk-rows as given";
}

TEST(DropChoice, Stage08KeptPairsTileByTile) {
  s08::TileGrid grid;
  grid.tiles = 3, grid.token_blocks = 2;
  // keep[T][b]: tile 0 keeps block 0, tile 1 nothing, tile 2 both blocks.
  const std::vector<int2> pairs = s08::kept_pair_list(grid, {1, 0, 0, 0, 1, 1});
  ASSERT_EQ(pairs.size(), 3u);
  EXPECT_EQ(pairs[0].x, 0);  // (token block, tile)
  EXPECT_EQ(pairs[0].y, 0);
  EXPECT_EQ(pairs[1].x, 0);
  EXPECT_EQ(pairs[1].y, 2);
  EXPECT_EQ(pairs[2].x, 1);
  EXPECT_EQ(pairs[2].y, 2);
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


// The grouping's need bits (16 bits per row and 16 tiles) share s09's work
// buffer where it holds them after the grouping's sort: at gemma2's shape stage
// 10 adds no item for them (its scratch stays within 1400 MB there). With
// 1 MiB of slots, small D and a wide V the buffer is too small: an item of
// their own, exactly their bytes.
TEST(DropChoice, NeedBitsShareTheWorkBufferWhereItHoldsThem) {
  const auto need_item = [](const std::vector<MemoryItem>& items) {
    return std::find_if(items.begin(), items.end(), [](const MemoryItem& item) {
      return item.first.find("the tiles each row needs") != std::string::npos;
    });
  };
  const Problem gemma2 = problem(8192, 2304, 256000, Dtype::kBFloat16);
  const DropPlan plan = plan_drop(gemma2);
  EXPECT_TRUE(need_bits_in_work(gemma2, plan));
  const std::vector<MemoryItem> items = batch_plan_items(gemma2, plan);
  EXPECT_EQ(need_item(items), items.end()) << "an item for the need bits at gemma2's shape";
  EXPECT_LT(total_bytes(items), size_t{200000}) << "stage 10's own items at gemma2's shape";

  const Problem wide = problem(32768, 8, 1000000, Dtype::kBFloat16);
  const DropPlan small = plan_drop(wide, 0, size_t{1} << 20);
  EXPECT_FALSE(need_bits_in_work(wide, small));
  const std::vector<MemoryItem> with_item = batch_plan_items(wide, small);
  const auto item = need_item(with_item);
  ASSERT_NE(item, with_item.end()) << "no item for need bits that the work buffer cannot hold";
  const size_t groups = (7813 + 15) / 16;  // 7813 tiles of 128 columns
  EXPECT_EQ(item->second, groups * 32768 * 2);
}

// Stage 10's plan: auto switches to dense just above a third of the pairs kept; a forced plan stays.
TEST(DropChoice, PlanSwitchesAboveAThird) {
  EXPECT_EQ(choose_backward_plan(BackwardPlan::kAuto, kDenseAboveKept), BackwardPlan::kSparse);
  EXPECT_EQ(choose_backward_plan(BackwardPlan::kAuto, std::nextafter(kDenseAboveKept, 1.0)),
            BackwardPlan::kDense);
  EXPECT_EQ(choose_backward_plan(BackwardPlan::kAuto, 0.0), BackwardPlan::kSparse);
  EXPECT_EQ(choose_backward_plan(BackwardPlan::kSparse, 1.0), BackwardPlan::kSparse);
  EXPECT_EQ(choose_backward_plan(BackwardPlan::kDense, 0.0), BackwardPlan::kDense);
  for (const BackwardPlan plan : {BackwardPlan::kAuto, BackwardPlan::kSparse, BackwardPlan::kDense})
    EXPECT_EQ(parse_backward_plan(to_string(plan)), plan);
  EXPECT_THROW(parse_backward_plan("Dense"), InputError);
}

// The dense plan's slabs: 512 MiB of fp32 logits by default (a multiple of
// 256 columns, at least 256, at most V), or the columns asked for; rows
// padded to 64 floats; enough slabs to cover V.
TEST(DropChoice, DenseSlabs) {
  Problem p;
  p.n = 8192, p.d = 2304, p.v = 256000;
  DenseSlabs slabs = plan_dense_slabs(p);
  EXPECT_EQ(slabs.columns, 16384);
  EXPECT_EQ(slabs.pitch, 16384);
  EXPECT_EQ(slabs.count, 16);
  EXPECT_LE(static_cast<size_t>(p.n * slabs.pitch) * 4, kDefaultDenseSlabBytes);
  p.n = 77, p.v = 1129;
  slabs = plan_dense_slabs(p);
  EXPECT_EQ(slabs.columns, 1129);
  EXPECT_EQ(slabs.pitch, 1152);
  EXPECT_EQ(slabs.count, 1);
  slabs = plan_dense_slabs(p, 300);
  EXPECT_EQ(slabs.columns, 300);
  EXPECT_EQ(slabs.pitch, 320);
  EXPECT_EQ(slabs.count, 4);
  p.dtype = Dtype::kFloat32;
  EXPECT_EQ(dense_slab_items(p, slabs, true), (std::vector<MemoryItem>{{kDenseSlabItem, size_t{77} * 320 * 4}}));
  p.dtype = Dtype::kBFloat16;  // dC's slab in fp32, rounded once by the plan
  EXPECT_EQ(dense_slab_items(p, slabs, true).back(), MemoryItem(kDenseDcSlabItem, size_t{300} * p.d * 4));
  EXPECT_EQ(dense_slab_items(p, slabs, false).size(), 1u) << "no dC: no slab of it";
  p.n = 1 << 22;  // the budget holds fewer than 256 columns: 256
  EXPECT_EQ(plan_dense_slabs(p).columns, 256);
}

// Before the forward: --plan dense always plans dense, sparse never; auto
// follows the last decision above a third kept, and every
// kDecideEveryBatches-th batch of a dense run decides again.
TEST(DropChoice, DenseBeforeTheForwardFollowsTheLastDecision) {
  EXPECT_TRUE(dense_before_forward(BackwardPlan::kDense, PlanHistory{}));
  EXPECT_FALSE(dense_before_forward(BackwardPlan::kSparse, PlanHistory{1.0, 0}));
  EXPECT_FALSE(dense_before_forward(BackwardPlan::kAuto, PlanHistory{}))
      << "no decision yet: the first batch decides";
  EXPECT_FALSE(dense_before_forward(BackwardPlan::kAuto, PlanHistory{kDenseAboveKept, 0}));
  EXPECT_TRUE(dense_before_forward(BackwardPlan::kAuto, PlanHistory{std::nextafter(kDenseAboveKept, 1.0), 0}));
  // A decision (batch 1), then batches 2 .. kDecideEveryBatches dense, then a decision again.
  EXPECT_EQ((KeptPairs{9, 10}).fraction(), 0.9);
  PlanHistory history = PlanHistory::decided(KeptPairs{9, 10}.fraction());
  EXPECT_EQ(history.kept_fraction, 0.9);
  EXPECT_EQ(history.dense_since, 0) << "a decision starts the count of dense batches again";
  int dense = 0;
  while (dense_before_forward(BackwardPlan::kAuto, history)) ++dense, ++history.dense_since;
  EXPECT_EQ(dense, kDecideEveryBatches - 1);
}

// The vocabulary order: sorted for a forward with none kept, for another
// problem or another buffer, and every sort_every-th batch; kept in between.
TEST(DropChoice, TheVocabularyOrderIsKeptUntilItsTurnToSort) {
  Problem p;
  p.n = 8192, p.d = 2304, p.v = 256000, p.dtype = Dtype::kBFloat16;
  const int order[2] = {0, 1};  // two buffers: only their addresses count
  EXPECT_TRUE(sorts_vocabulary(VocabularyOrderAge{}, p, order, kSortEveryBatches)) << "no order kept";
  VocabularyOrderAge age{p, order, 0};
  Problem other = p;
  other.n = 4096;
  EXPECT_TRUE(sorts_vocabulary(age, other, order, kSortEveryBatches)) << "another problem's order";
  EXPECT_TRUE(sorts_vocabulary(age, p, order + 1, kSortEveryBatches)) << "the order in another buffer";
  EXPECT_TRUE(sorts_vocabulary(age, p, order, 1)) << "--sort-every 1: every batch";
  // Batch 1 sorts; batches 2 .. kSortEveryBatches keep its order; the next one sorts.
  int kept = 0;
  while (!sorts_vocabulary(age, p, order, kSortEveryBatches)) ++kept, ++age.batches;
  EXPECT_EQ(kept, kSortEveryBatches - 1);
}

// That batch decides again on a sample of its rows first (auto only); the
// first batch, with no decision yet, decides on the whole batch.
TEST(DropChoice, ARunOfDenseBatchesDecidesAgainOnASample) {
  EXPECT_FALSE(decides_on_sample(BackwardPlan::kAuto, PlanHistory{})) << "the first batch";
  EXPECT_FALSE(decides_on_sample(BackwardPlan::kAuto, PlanHistory{0.9, kDecideEveryBatches - 2}));
  EXPECT_TRUE(decides_on_sample(BackwardPlan::kAuto, PlanHistory{0.9, kDecideEveryBatches - 1}));
  EXPECT_FALSE(decides_on_sample(BackwardPlan::kAuto, PlanHistory{0.2, kDecideEveryBatches - 1}))
      << "a sparse decision: every batch decides on the whole batch";
  EXPECT_FALSE(decides_on_sample(BackwardPlan::kDense, PlanHistory{0.9, kDecideEveryBatches - 1}));
  EXPECT_FALSE(decides_on_sample(BackwardPlan::kSparse, PlanHistory{0.9, kDecideEveryBatches - 1}));
  // A run: batch 1 decides on the whole batch, 2 .. kDecideEveryBatches follow it, the next one samples.
  PlanHistory history{0.9, 0};
  int batches = 1;
  while (!decides_on_sample(BackwardPlan::kAuto, history)) {
    ASSERT_TRUE(dense_before_forward(BackwardPlan::kAuto, history));
    ++batches, ++history.dense_since;
  }
  EXPECT_EQ(batches, kDecideEveryBatches);
}

// The sample: kSampleRows rows (all of a smaller batch) spread over the batch.
TEST(DropChoice, RowSampleSpreadsOverTheBatch) {
  Problem p;
  p.n = 8192, p.d = 2304, p.v = 256000;
  RowSample sample = plan_row_sample(p);
  EXPECT_EQ(sample.rows, kSampleRows);
  EXPECT_EQ(sample.stride, 8192 / kSampleRows);
  EXPECT_EQ(p.with_tokens(sample.rows).n, kSampleRows);
  EXPECT_EQ(p.with_tokens(sample.rows).v, p.v);
  p.n = kSampleRows + 77;  // not twice the sample: its first rows
  sample = plan_row_sample(p);
  EXPECT_EQ(sample.rows, kSampleRows);
  EXPECT_EQ(sample.stride, 1);
  p.n = 77;
  sample = plan_row_sample(p);
  EXPECT_EQ(sample.rows, 77);
  EXPECT_EQ(sample.stride, 1);
  EXPECT_LE((sample.rows - 1) * sample.stride, p.n - 1) << "every sampled row exists";
}

// What a batch on the dense plan before the forward reports (stages 10 and
// 11 alike): every pair kept, in the chunks' count, no eps; the last
// decision's kept fraction, or −1 when --plan dense forced it; the sample's
// rows when this batch decided on one.
TEST(DropChoice, DenseBeforeTheForwardReport) {
  DenseChunks chunks;
  chunks.rows = 128, chunks.count = 3, chunks.pitch = 20032, chunks.logit_bytes = 2;
  const DenseTargetRows target_rows{5, 2};
  DenseBeforeForwardReport report =
      report_dense_before_forward(1200, chunks, target_rows, BackwardPlan::kAuto, PlanHistory{0.75, 3}, 1024);
  EXPECT_EQ(report.stats.tiles, 1200);
  EXPECT_EQ(report.stats.kept_tiles, 1200);
  EXPECT_EQ(report.stats.chunks, 3);
  EXPECT_EQ(report.choice.eps, 0.0f);
  EXPECT_LT(report.choice.misplaced_mass, 0.0) << "no automatic eps chose anything";
  EXPECT_EQ(report.ran.plan, BackwardPlan::kDense);
  EXPECT_TRUE(report.ran.before_forward);
  EXPECT_EQ(report.ran.kept_fraction, 0.75) << "the decision it followed";
  EXPECT_EQ(report.ran.chunks.rows, 128);
  EXPECT_EQ(report.ran.target_rows.runs, 5);
  EXPECT_EQ(report.ran.target_rows.whole, 2);
  EXPECT_EQ(report.ran.sample_rows, 1024);
  report = report_dense_before_forward(1200, chunks, target_rows, BackwardPlan::kDense, PlanHistory{0.75, 3}, 0);
  EXPECT_EQ(report.ran.kept_fraction, -1.0) << "--plan dense: no decision";
  EXPECT_EQ(report.ran.sample_rows, 0);
}

// A sample's memory items named apart from the batch's, each once.
TEST(DropChoice, SampleItemsNamedApart) {
  const std::vector<MemoryItem> named =
      named_apart({{"row sample: E rows [sample rows, D]", 10}, {"vocabulary order [V]", 20}});
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0], MemoryItem("row sample: E rows [sample rows, D]", 10)) << "already the sample's: kept";
  EXPECT_EQ(named[1], MemoryItem("row sample: vocabulary order [V]", 20));
}

// The chunks of rows before the forward within kDefaultDenseScratchBytes:
// all N rows when their logits (bf16: q and the rows of E times α) fit, with
// no fp32 accumulator for dC; else as many rows as fit beside the accumulator
// (bf16), a multiple of 128, at least 128, or the rows asked for. q in bf16
// for bf16 inputs, whatever the softcap; fp32 logits for fp32 inputs.
TEST(DropChoice, DenseChunks) {
  Problem p;
  p.n = 8192, p.d = 2304, p.v = 256000;
  p.dtype = Dtype::kFloat32;
  DenseChunks chunks = plan_dense_chunks(p);
  EXPECT_EQ(chunks.logit_bytes, 4);
  EXPECT_EQ(chunks.rows, 4608) << "fp32: no accumulator, so the logits have the whole budget";
  EXPECT_EQ(chunks.count, 2);
  EXPECT_LE(static_cast<size_t>(chunks.rows * p.v) * 4, kDefaultDenseScratchBytes);
  p.dtype = Dtype::kBFloat16;
  chunks = plan_dense_chunks(p);
  EXPECT_EQ(chunks.logit_bytes, 2) << "bf16 inputs: q in bf16";
  EXPECT_EQ(chunks.rows, 8192) << "gemma2_flat: every row in one chunk (4.23 GB with the rows of E times alpha)";
  EXPECT_EQ(chunks.count, 1);
  std::vector<MemoryItem> items = dense_chunk_items(p, chunks, true);
  EXPECT_EQ(items.front(), MemoryItem(kDenseChunkItem, static_cast<size_t>(8192) * 256000 * 2));
  EXPECT_EQ(items.back(), MemoryItem(kDenseDcWorkspaceItem, kCublasWorkspaceBytes)) << "one chunk: dC by one product";
  for (const MemoryItem& item : items) EXPECT_NE(item.first, kDenseDcItem) << "one chunk: no accumulator";
  auto bytes_of = [&](const std::vector<MemoryItem>& list, const char* name) {
    for (const MemoryItem& item : list)
      if (item.first == name) return item.second;
    ADD_FAILURE() << "no item " << name;
    return size_t{0};
  };
  EXPECT_EQ(bytes_of(items, kDenseScaledRowsItem), static_cast<size_t>(8192) * 2304 * 2);
  p.n = 16384;  // twice the rows: several chunks, each beside dC's fp32 accumulator
  chunks = plan_dense_chunks(p);
  EXPECT_EQ(chunks.rows, 4736);
  EXPECT_EQ(chunks.count, 4);
  items = dense_chunk_items(p, chunks, true);
  EXPECT_EQ(items.back(), MemoryItem(kDenseDcItem, static_cast<size_t>(256000) * 2304 * 4));
  EXPECT_LE(items.front().second + bytes_of(items, kDenseScaledRowsItem) + items.back().second,
            kDefaultDenseScratchBytes)
      << "q, the rows of E times alpha and the accumulator within the budget";
  p.n = 8192;
  p.softcap = 30.0f;
  EXPECT_EQ(plan_dense_chunks(p).logit_bytes, 2) << "gemma2's softcap";
  p.softcap = 40000.0f;
  EXPECT_EQ(plan_dense_chunks(p).logit_bytes, 2) << "q holds any softcap";
  EXPECT_EQ(plan_dense_chunks(p).rows, 8192);
  p.softcap = 0.0f;
  p.dtype = Dtype::kFloat32;
  p.n = 77, p.v = 1129;
  EXPECT_EQ(plan_dense_chunks(p).rows, 77);
  EXPECT_EQ(plan_dense_chunks(p).count, 1);
  chunks = plan_dense_chunks(p, 30);
  EXPECT_EQ(chunks.count, 3);
  p.dtype = Dtype::kBFloat16;
  EXPECT_EQ(dense_chunk_items(p, chunks, true).back().first, kDenseDcItem) << "bf16: dC summed in fp32";
  EXPECT_EQ(dense_chunk_items(p, plan_dense_chunks(p), true).back().first, kDenseDcWorkspaceItem)
      << "bf16, one chunk: dC rounded once in its own product";
  EXPECT_EQ(dense_chunk_items(p, chunks, false).back().first, kDenseDeRowsItem) << "no dC: no accumulator; dE's rows";
  EXPECT_EQ(dense_chunk_items(p, plan_dense_chunks(p), false).back().first, kDenseDeRowsItem) << "nor a workspace";
  p.dtype = Dtype::kFloat32;
  for (const MemoryItem& item : dense_chunk_items(p, chunks, true))
    EXPECT_TRUE(item.first != kDenseDcItem && item.first != kDenseDeRowsItem) << "fp32: cuBLAS writes dE and dC";
  p.v = 1 << 24, p.n = 1000;  // the budget holds fewer than 128 rows: 128
  EXPECT_EQ(plan_dense_chunks(p).rows, 128);
}

// The report's plan line says which plan ran and why: the decision's share,
// the batch before's, or the flag.
TEST(DropChoice, PlanLineSaysWhichPlanAndWhy) {
  PlanChoice sparse;
  sparse.kept_fraction = 0.0125;
  EXPECT_EQ(describe_plan(sparse, BackwardPlan::kAuto),
            "backward     sparse: stage 09's products over the kept pairs (the decision keeps 1.25% of the pairs, "
            "at most 33.33%)");
  sparse.rows_in_token_order = true;
  EXPECT_EQ(describe_plan(sparse, BackwardPlan::kAuto),
            "backward     sparse: stage 09's products over the kept pairs (the decision keeps 1.25% of the pairs, "
            "at most 33.33%); dC's owners read E's rows by TMA from a copy in the token order (in dE's output)");
  PlanChoice before;
  before.plan = BackwardPlan::kDense;
  before.kept_fraction = 0.9999;
  before.before_forward = true;
  before.chunks = DenseChunks{4096, 2, 256000, 2};
  EXPECT_EQ(describe_plan(before, BackwardPlan::kAuto),
            "backward     dense before the forward: loss and gradient by 3 GEMMs per chunk of 4096 rows (2 chunks, "
            "q bf16 logits) (the last decision kept 99.99% of the pairs, more than 33.33%; every 16th batch decides "
            "again on a sample)");
  before.sample_rows = 1024;
  EXPECT_EQ(describe_plan(before, BackwardPlan::kAuto),
            "backward     dense before the forward: loss and gradient by 3 GEMMs per chunk of 4096 rows (2 chunks, "
            "q bf16 logits) (a sample of 1024 rows decided now: it keeps 99.99% of the pairs, more than 33.33%; every "
            "16th batch decides again on a sample)");
  before.sample_rows = 0;
  before.kept_fraction = -1.0;
  before.chunks = DenseChunks{2048, 4, 256000, 4};
  EXPECT_EQ(describe_plan(before, BackwardPlan::kDense),
            "backward     dense before the forward: loss and gradient by 3 GEMMs per chunk of 2048 rows (4 chunks, "
            "fp32 logits) (--plan dense)");
}

// E's rows are copied into the token order for dC's owners only where the
// kept pairs take several chunks even with the dE output's slots, and the
// work buffer's slots alone hold at least half of a chunk's: lm128k's shape
// copies (1.5 times the chunks), gemma2's and llama3's do not (2.5 and 3.7
// times); nor without a token order, or without a dC to write.
TEST(DropChoice, RowsCopiedForDcOnlyWhereTheChunksAtMostDouble) {
  const Problem lm128k = problem(8192, 2048, 128000, Dtype::kBFloat16);
  const DropPlan plan = plan_drop(lm128k);
  ASSERT_GT(plan.spill_slot_capacity, 0);
  EXPECT_EQ(plan_with_rows_in_de(plan).spill_slot_capacity, 0);
  const int64_t several = 3 * plan.chunk_slots();
  EXPECT_TRUE(rows_copy_pays(plan, several));
  EXPECT_FALSE(rows_copy_pays(plan, plan.chunk_slots())) << "one chunk";
  for (const Problem& p : {problem(8192, 2304, 256000, Dtype::kBFloat16), problem(8192, 4096, 128256, Dtype::kBFloat16)}) {
    const DropPlan wide = plan_drop(p);
    EXPECT_FALSE(rows_copy_pays(wide, 3 * wide.chunk_slots()))
        << "D = " << p.d << ": " << wide.slot_capacity << " slots without the dE output's " << wide.spill_slot_capacity;
  }
  // The whole rule, where this build has the owners that read rows by TMA.
  if (!s09::dc_rows_by_tma(lm128k)) GTEST_SKIP() << "this build has no wgmma owners (no sm_90a): no rows by TMA";
  int somewhere[2] = {};
  const s08::TokenBlocks grouped{somewhere, somewhere}, in_order{};
  void* out = somewhere;
  EXPECT_TRUE(copies_rows_in_token_order(lm128k, plan, several, grouped, out, out));
  EXPECT_FALSE(copies_rows_in_token_order(lm128k, plan, plan.chunk_slots(), grouped, out, out)) << "one chunk";
  EXPECT_FALSE(copies_rows_in_token_order(lm128k, plan, several, in_order, out, out)) << "rows in their order";
  EXPECT_FALSE(copies_rows_in_token_order(lm128k, plan, several, grouped, out, nullptr)) << "no dC";
}

// A bf16 slot holds each of a 128 × 128 tile's elements once, and fp32's
// 64 × 64 tile is row-major.
TEST(SlotLayout, EveryElementOnce) {
  std::set<int64_t> seen;
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 128; ++c) seen.insert(s09::s_index<__nv_bfloat16, 128>(r, c));
  EXPECT_EQ(seen.size(), 128u * 128u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 128 * 128 - 1);
  EXPECT_EQ((s09::s_index<float, 64>(5, 7)), 5 * 64 + 7);
}

// dE's owner copies the vocabulary half `step` ([128 tokens][64 vocabulary],
// 16 KB) in one piece to a stage that wgmma reads K-major in the 128-byte
// swizzle: element (r, 64·step + 8·chunk + e) at byte r·128 + (chunk ^ r % 8)·16
// + 2e (the layout the cp.async owners wrote, common/tile/wgmma.cuh).
TEST(SlotLayout, DeHalfIsTheKMajorOperand) {
  for (int step = 0; step < 2; ++step) {
    const int64_t start = s09::s_index<__nv_bfloat16, 128>(0, 64 * step);
    for (int r = 0; r < 128; ++r)
      for (int chunk = 0; chunk < 8; ++chunk)
        for (int e = 0; e < 8; ++e) {
          const int64_t bytes = 2 * (s09::s_index<__nv_bfloat16, 128>(r, 64 * step + 8 * chunk + e) - start);
          ASSERT_EQ(bytes, r * 128 + ((chunk ^ (r % 8)) * 16) + 2 * e) << "step " << step << " row " << r;
        }
  }
}

// dC's owner copies token rows 64·step.. of each vocabulary half (8 KB each)
// to the two 64-column pieces of Sᵀ, which wgmma reads MN-major: element
// (64·step + k, 8·chunk + e) at byte (chunk / 8)·8192 + k·128 +
// (chunk % 8 ^ k % 8)·16 + 2e (kept_products.cu's mn_major_offset).
TEST(SlotLayout, DcRowsAreTheMnMajorOperand) {
  for (int step = 0; step < 2; ++step)
    for (int k = 0; k < 64; ++k)
      for (int chunk = 0; chunk < 16; ++chunk)
        for (int e = 0; e < 8; ++e) {
          const int half = chunk / 8;
          const int64_t from = s09::s_index<__nv_bfloat16, 128>(64 * step, 64 * half);
          const int64_t bytes =
              half * 8192 + 2 * (s09::s_index<__nv_bfloat16, 128>(64 * step + k, 8 * chunk + e) - from);
          ASSERT_EQ(bytes, half * 8192 + k * 128 + (((chunk % 8) ^ (k % 8)) * 16) + 2 * e)
              << "step " << step << " k " << k << " chunk " << chunk;
        }
}

}  // namespace
}  // namespace cce::s10
