// Stage 09's plan, memory model and the order of its steps (the steps
// themselves: stage 08's forward, decision and tail correction,
// kept_tiles.cu, kept_products.cu).
#include "stages/09_deterministic_products/deterministic_products.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/check.h"
#include "common/token_reduction.h"

namespace cce::s09 {
namespace {

// Recomputed S tiles held at once (a chunk): the backward's scratch aims at
// kScratchTarget, so the slots take what the tile statistics, the fp32 dE
// accumulator and the tile means leave of it, and never less than
// kLeastSlotBytes. At gemma2 and llama3 those items alone exceed it (the
// slots get the least); at V = 32000 the slots hold every kept tile at once.
constexpr size_t kLeastSlotBytes = size_t{24} << 20;
constexpr size_t kScratchTarget = size_t{160} << 20;
constexpr int64_t kChunkMultiple = 256;           // the forward's chunks: whole tiles of every product

size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

// The recomputation's thread blocks for tiles [first, last): per token block,
// its kept tiles there cut into runs of consecutive tiles (so that the
// product's pipeline runs on from tile to tile). A run holds at most
// kRunTiles, and fewer when the chunk keeps few tiles: about kRunsPerBlock
// runs per resident block, listed longest first, so that the last wave holds
// the short runs and no SM is left with one long run while the others idle.
constexpr int64_t kRunTiles = 8;
constexpr int64_t kRunsPerBlock = 4;
// Written straight into page-locked memory (host.sent), whence they are copied
// to the device. Longest first by a counting sort over the lengths 1..kRunTiles:
// the runs are found twice, counted by length, then each written to its place,
// in the order found within one length (the same lists give the same runs).
HostSpan<int> recompute_runs(const KeptTiles& kept, const DropPlan& plan, int64_t first, int64_t last,
                             int64_t resident_blocks, HostTables& host) {
  const int64_t kept_here = kept.offsets[last] - kept.offsets[first];
  const int64_t run_tiles = std::clamp<int64_t>(kept_here / (kRunsPerBlock * resident_blocks), 1, kRunTiles);
  struct Run {  // what the recomputation reads as an int4 per thread block
    int token_block, first_tile, end_tile, unused;
  };
  auto for_each_run = [&](auto&& use) {
    for (int64_t b = 0; b < plan.token_blocks; ++b) {
      const int* list = kept.block_lists.data() + b * (plan.tiles + 1);
      const int* begin = std::lower_bound(list + 1, list + 1 + list[0], static_cast<int>(first));
      const int* end = std::lower_bound(begin, list + 1 + list[0], static_cast<int>(last));
      for (const int* t = begin; t < end;) {
        const int* run_end = t + 1;
        while (run_end < end && *run_end == *(run_end - 1) + 1 && run_end - t < run_tiles) ++run_end;
        use(Run{static_cast<int>(b), *t, *(run_end - 1) + 1, 0});
        t = run_end;
      }
    }
  };
  int64_t place[kRunTiles + 1] = {};  // per length: its count, then where its next run goes
  for_each_run([&](const Run& run) { ++place[run.end_tile - run.first_tile]; });
  int64_t count = 0;
  for (int64_t length = kRunTiles; length >= 1; --length) {
    const int64_t runs_of_length = place[length];
    place[length] = count;
    count += runs_of_length;
  }
  Run* runs = reinterpret_cast<Run*>(host.sent.take<int>(static_cast<size_t>(4 * count)));  // <= 1 per kept tile
  for_each_run([&](const Run& run) { runs[place[run.end_tile - run.first_tile]++] = run; });
  return {reinterpret_cast<int*>(runs), static_cast<size_t>(4 * count)};
}

}  // namespace

DropPlan plan_drop(const Problem& p, int64_t chunk_rows, size_t slot_budget) {
  DropPlan plan;
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  const size_t element = p.element_bytes();
  plan.tile_rows = plan.tile_cols = s08::backward_tile(p.dtype);
  plan.tiles = (p.v + plan.tile_cols - 1) / plan.tile_cols;
  plan.token_blocks = (p.n + plan.tile_rows - 1) / plan.tile_rows;
  plan.slot_bytes = plan.tile_rows * plan.tile_cols * static_cast<int64_t>(element);
  const int64_t pairs = plan.tiles * plan.token_blocks;
  plan.de_accumulator_bytes = bf16 ? static_cast<size_t>(p.n * p.d) * 4 : 0;
  if (slot_budget == 0) {
    const size_t fixed = static_cast<size_t>(plan.tiles) * static_cast<size_t>(p.n) * 4 + plan.de_accumulator_bytes +
                         static_cast<size_t>(plan.tiles * p.d) * element;  // statistics, dE accumulator, tile means
    slot_budget = std::max(kLeastSlotBytes, kScratchTarget > fixed ? kScratchTarget - fixed : 0);
  }
  plan.slot_capacity =
      std::min(pairs, std::max(plan.token_blocks, static_cast<int64_t>(slot_budget) / plan.slot_bytes));
  // bf16: the dE output holds S tiles too until dE is written (fewer chunks:
  // each chunk costs a pass of dE's blocks over every token block).
  plan.spill_slot_capacity = bf16 ? p.n * p.d * 2 / plan.slot_bytes : 0;
  plan.region_offset = round_up(plan.de_accumulator_bytes, 256);
  plan.region_bytes = static_cast<size_t>(plan.slot_capacity * plan.slot_bytes);
  plan.work_bytes = std::max({plan.region_offset + plan.region_bytes, s08::sort_work_bytes(p.v), target_sort_work_bytes(p.n)});
  // The forward gathers as many rows of sorted C as the buffer holds.
  const size_t row_bytes = static_cast<size_t>(p.d) * element;
  plan.chunk_rows = std::max<int64_t>(kChunkMultiple, static_cast<int64_t>(plan.work_bytes / row_bytes) / kChunkMultiple *
                                                          kChunkMultiple);
  if (chunk_rows > 0) plan.chunk_rows = chunk_rows;
  if (plan.chunk_rows >= p.v) plan.chunk_rows = p.v;
  plan.work_bytes = std::max(plan.work_bytes, static_cast<size_t>(plan.chunk_rows) * row_bytes);
  plan.ranges = s08::plan_sorted_forward(p, plan.chunk_rows).ranges;
  plan.tail_sums_in_stats = bf16 && p.n % 2 == 0 && 4 * p.d <= 2 * p.n;
  // Statistics rows are 4N bytes: slots there stay 16-byte aligned when N % 4 == 0.
  if (bf16 && p.n % 4 == 0) {
    StatsSlotLayout& rows = plan.stats_slots;
    rows.row_bytes = 4 * p.n;
    const int64_t low_end = plan.tail_sums_in_stats ? 2 * p.n : rows.row_bytes;  // M's half, or the whole row
    rows.high_offset = plan.tail_sums_in_stats ? static_cast<int64_t>(round_up(2 * p.n + 4 * p.d, 256)) : rows.row_bytes;
    rows.low_slots = low_end / plan.slot_bytes;
    rows.row_slots = rows.low_slots + std::max<int64_t>(0, rows.row_bytes - rows.high_offset) / plan.slot_bytes;
    plan.stats_slot_capacity = rows.row_slots * plan.tiles;
  }
  return plan;
}

float DeterministicProductsStage::drop_eps(Dtype dtype) const {
  if (keep_all_) return 0.0f;
  return eps_flag_ > 0.0 ? static_cast<float>(eps_flag_) : s08::default_drop_eps(dtype);
}

void DeterministicProductsStage::add_options(OptionParser& parser) {
  add_drop_options(parser,
                   "drop (token block, tile) pairs whose every softmax entry is below eps; 0 = 2^-8 (bf16), 2^-28 (fp32)");
}

void DeterministicProductsStage::add_drop_options(OptionParser& parser, const char* eps_help) {
  parser.add_double("drop-eps", &eps_flag_, eps_help);
  parser.add_flag("keep-all", &keep_all_, "recompute every tile (the exact backward, deterministic)");
  parser.add_flag("no-correction", &no_correction_, "drop tiles without correcting dE and dC for them");
  parser.add_flag("no-dc-correction", &no_dc_correction_, "correct dE only");
  parser.add_int("slot-mb", &slot_mb_flag_,
                 "MiB of recomputed S tiles the backward holds at once (fewer: more chunks); 0 = what 160 MiB of "
                 "scratch leaves, at least 24");
  parser.add_int("chunk-rows", &chunk_rows_flag_,
                 "rows of sorted C the forward gathers at once, a multiple of 256; 0 = what the backward's buffer holds");
}

void DeterministicProductsStage::validate_options() const {
  if (!(eps_flag_ >= 0.0 && eps_flag_ < 1.0)) throw InputError("--drop-eps must be in [0, 1)");
  if (keep_all_ && eps_flag_ > 0.0) throw InputError("--drop-eps and --keep-all contradict each other");
  if (slot_mb_flag_ < 0 || slot_mb_flag_ > (int64_t{1} << 20)) throw InputError("--slot-mb must be in [0, 1048576]");
  if (chunk_rows_flag_ < 0 || chunk_rows_flag_ % 256 != 0)
    throw InputError("--chunk-rows must be a multiple of 256 (0: the default)");
}

s08::SortedForwardPlan forward_plan(const DropPlan& plan) {
  s08::SortedForwardPlan forward;
  forward.chunk_rows = plan.chunk_rows;
  forward.ranges = plan.ranges;
  forward.work_bytes = plan.work_bytes;
  return forward;
}

std::vector<MemoryItem> tail_sums_scratch(const Problem& p, const DropPlan& plan) {
  if (plan.tail_sums_in_stats) return {};
  return {{"dC tail sums [tiles][D]", static_cast<size_t>(plan.tiles * p.d) * 4}};
}

std::vector<MemoryItem> backward_scratch(const Problem& p, const DropPlan& plan) {
  return concat(concat(s08::sorted_forward_items(p, forward_plan(plan)), kept_tiles_scratch(p, plan)),
                tail_sums_scratch(p, plan));
}

std::vector<MemoryItem> kept_tiles_scratch(const Problem& p, const DropPlan& plan) {
  const size_t n = static_cast<size_t>(p.n), pairs = static_cast<size_t>(plan.tiles * plan.token_blocks);
  return {
      {"per-token grad scale [N]", n * 4},
      {"target coefficient [N]", n * 4},
      {"targets sorted by position: positions, tokens [2][N], tile offsets [tiles+1]",
       n * 8 + static_cast<size_t>(plan.tiles + 1) * 4},
      {"dE parts [token blocks + pairs/16][4], turns [token blocks][D/64], ticket",
       static_cast<size_t>(4 * de_part_capacity(plan) + plan.token_blocks * de_column_tiles(p) + 1) * 4},
      {"keep flags [tiles][token blocks]", pairs},
      {"kept counts [tiles], slot offsets [tiles+1], tiles with slots [tiles]",
       static_cast<size_t>(3 * plan.tiles + 1) * 4},
      {"kept tiles of each token block [token blocks][1+tiles]",
       static_cast<size_t>(plan.token_blocks * (plan.tiles + 1)) * 4},
      {"slots: token block, tile, slot of pair [3][pairs]", pairs * 12},
      {"recompute runs [slots]", static_cast<size_t>(plan.chunk_slots()) * 16},
  };
}

BackwardBuffers backward_buffers(const Problem& p, const DropPlan& plan, const Scratch& scratch) {
  BackwardBuffers b;
  b.forward = s08::sorted_forward_buffers(scratch);
  b.grad_scale = scratch.get<float>("per-token grad scale [N]");
  b.target_coefficient = scratch.get<float>("target coefficient [N]");
  b.sorted_targets = scratch.get<int>("targets sorted by position: positions, tokens [2][N], tile offsets [tiles+1]");
  b.de_parts = scratch.get<int>("dE parts [token blocks + pairs/16][4], turns [token blocks][D/64], ticket");
  b.keep = scratch.get<uint8_t>("keep flags [tiles][token blocks]");
  b.kept_counts = scratch.get<int>("kept counts [tiles], slot offsets [tiles+1], tiles with slots [tiles]");
  b.block_lists = scratch.get<int>("kept tiles of each token block [token blocks][1+tiles]");
  b.slots = scratch.get<int>("slots: token block, tile, slot of pair [3][pairs]");
  b.recompute_runs = scratch.get<int>("recompute runs [slots]");
  if (plan.tail_sums_in_stats) {  // the second half of each tile's statistics row (bytes 2N..4N), past M (bf16)
    b.tail.sums = reinterpret_cast<float*>(b.forward.kept.stats) + p.n / 2;
    b.tail.ld = p.n;
  } else {
    b.tail.sums = scratch.get<float>("dC tail sums [tiles][D]");
    b.tail.ld = p.d;
  }
  return b;
}

std::vector<MemoryItem> DeterministicProductsStage::workspace(const Problem& p, bool backward) const {
  if (!backward) return s08::loss_only_items(p);  // a loss alone keeps nothing
  return backward_scratch(p, plan_for(p));
}

void DeterministicProductsStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  const Problem& p = in.problem;
  last_problem_ = p;
  stats_ready_ = false;
  if (!backward_follows_) {
    scratch_.allocate(s08::loss_only_items(p));
    s08::loss_only_forward(in, scratch_, loss, lse, stream);
    return;
  }
  const DropPlan plan = plan_for(p);
  scratch_.allocate(s08::sorted_forward_items(p, forward_plan(plan)));
  s08::sorted_forward(in, forward_plan(plan), s08::sorted_forward_buffers(scratch_), loss, lse, scratch_, stream);
  stats_ready_ = true;
}

void compute_grad_scale(const DeviceInputs& in, const float* upstream, const BackwardBuffers& buffers,
                        cudaStream_t stream) {
  compute_token_grad_scale(in.problem, in.targets.get(), upstream, buffers.grad_scale, stream);
}

float* de_accumulator(const Problem& p, const BackwardBuffers& buffers, void* de) {
  return p.dtype == Dtype::kBFloat16 ? reinterpret_cast<float*>(buffers.forward.work) : static_cast<float*>(de);
}

float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, const BackwardBuffers& buffers,
                               const float* lse, const BackwardChoice& choice, const KeptTiles& kept, void* de,
                               void* dc, cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats,
                               int64_t first_tile) {
  const Problem& p = in.problem;
  unsigned char* work = buffers.forward.work;
  float* de_acc = de_accumulator(p, buffers, de);
  SlotSpace space;
  space.region = work + plan.region_offset;
  space.region_slots = plan.slot_capacity;
  space.slot_bytes = plan.slot_bytes;
  if (p.dtype == Dtype::kBFloat16) space.spill = de, space.spill_slots = plan.spill_slot_capacity;
  if (plan.stats_slot_capacity > 0) {  // dead after the tail correction, which runs before the first chunk
    space.stats = buffers.forward.kept.stats;
    space.stats_slots = plan.stats_slots;
  }
  const int64_t capacity = plan.chunk_slots();
  const int64_t pairs = plan.tiles * plan.token_blocks;
  const TailSums& tail = kept.tail;

  // Chunks of consecutive tiles whose kept S tiles fit the slots.
  const int64_t resident_blocks = recompute_resident_blocks(p);
  int64_t chunks = 0;
  for (int64_t first = first_tile; first < plan.tiles;) {
    int64_t last = first + 1;
    while (last < plan.tiles && kept.offsets[last + 1] - kept.offsets[first] <= capacity) ++last;
    const int64_t first_slot = kept.offsets[first];
    const HostSpan<int> runs = recompute_runs(kept, plan, first, last, resident_blocks, host);
    recompute_kept_tiles(in, plan, buffers, lse, choice.blocks, runs, first_slot, space, stream);
    kept_products(in, plan, buffers, kept, choice.blocks, choice.e_in_token_order, tail, space, first_slot, first, last,
                  de_acc, dc, stream, side, host);
    first = last;
    ++chunks;
  }
  if (stats != nullptr) *stats = DropStats{pairs, kept.kept(), chunks, choice.eps};
  return de_acc;
}

void DeterministicProductsStage::backward_at(const DeviceInputs& in, const float* lse, const BackwardChoice& choice,
                                             void* de, void* dc, cudaStream_t stream) {
  const DropPlan plan = plan_for(in.problem);
  const BackwardBuffers buffers = backward_buffers(in.problem, plan, scratch_);
  const KeptTiles kept = decide_kept_tiles(in, plan, buffers, lse, choice, de_accumulator(in.problem, buffers, de), dc,
                                           host_, stream);
  const float* de_acc = backward_to_accumulator(in, plan, buffers, lse, choice, kept, de, dc, stream, side_, host_, &stats_);
  finish_de(in, buffers, de_acc, de, stream);
}

void DeterministicProductsStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de,
                                          void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!stats_ready_)
    throw InputError(name() + ": backward() needs a forward() told that a backward follows (expect_backward(true))");
  stats_ready_ = false;  // the correction overwrites the statistics
  scratch_.allocate(workspace(p, true));
  compute_grad_scale(in, upstream, backward_buffers(p, plan_for(p), scratch_), stream);
  backward_at(in, lse, flags_choice(p.dtype), de, dc, stream);
}

std::vector<uint8_t> DeterministicProductsStage::kept_flags() const {
  const DropPlan plan = plan_for(last_problem_);
  std::vector<uint8_t> flags(static_cast<size_t>(plan.tiles * plan.token_blocks));
  if (!flags.empty()) copy_to_host(flags.data(), backward_buffers(last_problem_, plan, scratch_).keep, flags.size());
  return flags;
}

std::vector<int> DeterministicProductsStage::vocabulary_order() const {
  std::vector<int> order(static_cast<size_t>(last_problem_.v));
  if (!order.empty()) copy_to_host(order.data(), s08::sorted_forward_buffers(scratch_).kept.vocabulary_order, order.size() * 4);
  return order;
}

std::string describe_drop_plan(const DropPlan& plan, int64_t forward_chunk_rows) {
  char buf[384];
  std::snprintf(buf, sizeof buf,
                "plan         %lld sorted tiles of %lld x %lld token blocks; forward chunks of %lld rows of C; "
                "%lld S tiles per backward chunk (work buffer %lld, dE output %lld, statistics %lld)",
                static_cast<long long>(plan.tiles), static_cast<long long>(plan.tile_cols),
                static_cast<long long>(plan.token_blocks), static_cast<long long>(forward_chunk_rows),
                static_cast<long long>(plan.chunk_slots()), static_cast<long long>(plan.slot_capacity),
                static_cast<long long>(plan.spill_slot_capacity), static_cast<long long>(plan.stats_slot_capacity));
  return buf;
}

std::vector<std::string> DeterministicProductsStage::report_lines() const {
  std::vector<std::string> lines;
  if (last_problem_.n == 0) return lines;
  const DropPlan plan = plan_for(last_problem_);
  lines.push_back(describe_drop_plan(plan, plan.chunk_rows));
  char buf[384];
  const float eps = stats_.tiles > 0 ? stats_.eps : drop_eps(last_problem_.dtype);
  std::snprintf(buf, sizeof buf, "drop         %s; tail correction %s", s08::describe_eps(eps).c_str(),
                no_correction_ ? "off" : no_dc_correction_ ? "of dE" : "of dE and dC");
  lines.push_back(buf);
  if (stats_.tiles > 0) {
    std::snprintf(buf, sizeof buf, "kept tiles   %lld of %lld (%.2f%%) recomputed, in %lld chunks",
                  static_cast<long long>(stats_.kept_tiles), static_cast<long long>(stats_.tiles),
                  100.0 * static_cast<double>(stats_.kept_tiles) / static_cast<double>(stats_.tiles),
                  static_cast<long long>(stats_.chunks));
    lines.push_back(buf);
  }
  return lines;
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<DeterministicProductsStage>(); }

}  // namespace cce::s09
