// Stage 10's class: the plan's flags and report, and the order of its
// backward's steps (the plan itself: batch_plan.cu; the rest: stage 09).
#include "stages/10_plan_per_batch/plan_per_batch.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "common/check.h"

namespace cce::s10 {
namespace {

// Batches of one model: the history of plans carries over while the shape stays.
bool same_model(const Problem& a, const Problem& b) {
  return a.n == b.n && a.d == b.d && a.v == b.v && a.dtype == b.dtype;
}

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", 100.0 * fraction);
  return buf;
}

// The automatic eps's candidates in words, as the help and the report give them: "2^-8, 2^-8.25..2^-17".
std::string candidate_range() {
  char buf[48];
  std::snprintf(buf, sizeof buf, "2^-%d, 2^-%g..2^-%d", kAutoFirstExponent, -candidate_log2_eps(1),
                kAutoLastExponent);
  return buf;
}

}  // namespace

bool sorts_vocabulary(const VocabularyOrderAge& age, const Problem& problem, const int* order, int64_t sort_every) {
  return age.batches < 0 || !same_model(age.problem, problem) || age.order != order || age.batches + 1 >= sort_every;
}

int forward_states_keeping_order(const DeviceInputs& in, const s08::SortedForwardPlan& plan,
                                 const s08::SortedForwardBuffers& buffers, int64_t sort_every,
                                 VocabularyOrderAge& age, cudaStream_t stream) {
  const int* order = buffers.kept.vocabulary_order;
  if (sorts_vocabulary(age, in.problem, order, sort_every)) {
    s08::sort_vocabulary(in, buffers, stream);
    age = {in.problem, order, 0};
  } else {
    ++age.batches;  // the buffer's order is the batch before's
  }
  s08::forward_in_order(in, plan, buffers, stream);
  return age.batches;
}

std::vector<MemoryItem> backward_scratch(const Problem& p, const DropPlan& plan) {
  return concat(s09::backward_scratch(p, plan), batch_plan_items(p, plan));
}

const char* to_string(BackwardPlan plan) {
  switch (plan) {
    case BackwardPlan::kSparse: return "sparse";
    case BackwardPlan::kDense: return "dense";
    default: return "auto";
  }
}

BackwardPlan parse_backward_plan(const std::string& text) {
  if (text == "auto") return BackwardPlan::kAuto;
  if (text == "sparse") return BackwardPlan::kSparse;
  if (text == "dense") return BackwardPlan::kDense;
  throw InputError("--plan must be auto, sparse or dense, not '" + text + "'");
}

BackwardPlan choose_backward_plan(BackwardPlan flag, double kept_fraction) {
  if (flag != BackwardPlan::kAuto) return flag;
  return kept_fraction > kDenseAboveKept ? BackwardPlan::kDense : BackwardPlan::kSparse;
}

bool dense_before_forward(BackwardPlan flag, const PlanHistory& history) {
  if (flag != BackwardPlan::kAuto) return flag == BackwardPlan::kDense;
  return history.kept_fraction > kDenseAboveKept && history.dense_since < kDecideEveryBatches - 1;
}

bool decides_on_sample(BackwardPlan flag, const PlanHistory& history) {
  return flag == BackwardPlan::kAuto && history.kept_fraction > kDenseAboveKept &&
         history.dense_since >= kDecideEveryBatches - 1;
}

RowSample plan_row_sample(const Problem& p) {
  RowSample sample;
  sample.rows = std::min(p.n, kSampleRows);
  sample.stride = sample.rows > 0 ? p.n / sample.rows : 1;
  return sample;
}

PlanChoice choose_plan(BackwardPlan flag, const KeptPairs& pairs) {
  PlanChoice chosen;
  chosen.kept_fraction = pairs.fraction();
  chosen.plan = choose_backward_plan(flag, chosen.kept_fraction);
  return chosen;
}

DropSettings planned_from(DropSettings settings, const PlanHistory& history) {
  if (settings.misplaced_mass > 0.0) settings.last_automatic_eps = history.automatic_eps;
  return settings;
}

float grouping_log_threshold(const DropSettings& settings) {
  if (settings.misplaced_mass > 0.0 && settings.last_automatic_eps > 0.0f)
    return near_eps_log_threshold(std::log(settings.last_automatic_eps));
  return std::log(std::ldexp(1.0f, -kGroupingExponent));
}

BatchBackward begin_backward(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                             const float* upstream, const DropSettings& settings, cudaStream_t stream) {
  const Problem& p = in.problem;
  BatchBackward batch;
  batch.buffers = s09::backward_buffers(p, plan, scratch);
  batch.plan_buffers = batch_plan_buffers(p, scratch);
  batch.choice = s09::BackwardChoice{settings.eps, s08::TokenBlocks{}, settings.correct_tail, settings.correct_dc};
  batch.eps = EpsChoice{settings.eps, -1.0, {}};
  s09::compute_grad_scale(in, upstream, batch.buffers, stream);
  if (settings.plan != BackwardPlan::kDense && settings.group_tokens)
    batch.choice.blocks =
        group_tokens(p, plan, batch.plan_buffers, batch.buffers, lse, grouping_log_threshold(settings), stream);
  return batch;
}

void measure_for_decision(const Problem& p, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          const BatchBackward& batch, HostTables& host, cudaStream_t stream) {
  host.read_back.reset();  // the read-backs of the last decision were waited for
  if (settings.misplaced_mass > 0.0)
    measure_misplaced_mass(p, plan, batch.plan_buffers, batch.buffers, lse, batch.choice.blocks, stream);
}

bool regroups(const DropSettings& settings, const BatchBackward& batch) {
  return settings.misplaced_mass > 0.0 && settings.last_automatic_eps <= 0.0f && batch.choice.blocks.token_order != nullptr;
}

void regroup_for_decision(const Problem& p, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          BatchBackward& batch, cudaStream_t stream) {
  if (regroups(settings, batch))
    regroup_near_chosen_eps(p, plan, batch.plan_buffers, batch.buffers, lse, settings.misplaced_mass,
                            batch.choice.blocks, stream);
}

KeptPairs finish_decision(const DeviceInputs& in, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          BatchBackward& batch, float* de_acc, void* dc, HostTables& host, cudaStream_t stream) {
  if (settings.misplaced_mass > 0.0) {
    const PendingEps pending =
        keep_pairs_within_budget(plan, batch.buffers, batch.plan_buffers, settings.misplaced_mass, host, stream);
    // A decision that recomputes nothing (de_acc null: a sample's) has no head to run.
    const int* head = settings.dense_head_share > 0.0 && de_acc != nullptr
                          ? mark_dense_head(plan, batch.buffers, settings.dense_head_share,
                                            batch.plan_buffers.head_tiles, host, stream)
                          : nullptr;
    batch.kept = s09::kept_tiles_from_flags(in, plan, batch.buffers, lse, batch.choice, de_acc, dc, host, stream);
    batch.head_tiles = head != nullptr ? *head : 0;
    batch.eps = pending.chosen();  // the decision has waited: the masses are here
    batch.choice.eps = batch.eps.eps;
  } else {  // settings.eps, as begin_backward set it
    batch.kept = s09::decide_kept_tiles(in, plan, batch.buffers, lse, batch.choice, de_acc, dc, host, stream);
  }
  return KeptPairs{batch.kept.kept(), plan.tiles * plan.token_blocks};
}

KeptPairs decide_kept_pairs(const DeviceInputs& in, const DropPlan& plan, const float* lse, const DropSettings& settings,
                            BatchBackward& batch, float* de_acc, void* dc, HostTables& host, cudaStream_t stream) {
  measure_for_decision(in.problem, plan, lse, settings, batch, host, stream);
  regroup_for_decision(in.problem, plan, lse, settings, batch, stream);
  return finish_decision(in, plan, lse, settings, batch, de_acc, dc, host, stream);
}

float* run_backward_plan(const DeviceInputs& in, const DropPlan& plan, Scratch& scratch, const float* lse,
                         const DropSettings& settings, PlanChoice& chosen, const BatchBackward& batch, void* de,
                         void* dc, cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats) {
  const Problem& p = in.problem;
  if (chosen.plan == BackwardPlan::kSparse) {
    chosen.head_tiles = batch.head_tiles;
    if (batch.head_tiles > 0) {  // the head first, into the accumulator that holds the tail correction
      scratch.allocate(dense_head_items(p, dc != nullptr));
      dense_head_backward(in, plan, batch.buffers, batch.head_tiles, scratch, lse,
                          s09::de_accumulator(p, batch.buffers, de), dc, stream);
    }
    s09::BackwardChoice choice = batch.choice;
    chosen.rows_in_token_order = copies_rows_in_token_order(p, plan, batch.kept.kept(), choice.blocks, de, dc);
    if (chosen.rows_in_token_order) choice.e_in_token_order = copy_rows_in_token_order(in, choice.blocks, de, stream);
    return s09::backward_to_accumulator(in, chosen.rows_in_token_order ? plan_with_rows_in_de(plan) : plan,
                                        batch.buffers, lse, choice, batch.kept, de, dc, stream, side, host, stats,
                                        batch.head_tiles);
  }
  // Dense: every target's term is in S, so finish_de must add none.
  chosen.slabs = plan_dense_slabs(p, settings.dense_slab_columns);
  scratch.allocate(dense_slab_items(p, chosen.slabs, dc != nullptr));
  CCE_CUDA_CHECK(cudaMemsetAsync(batch.buffers.target_coefficient, 0, static_cast<size_t>(p.n) * 4, stream));
  float* de_acc = s09::de_accumulator(p, batch.buffers, de);
  dense_backward(in, chosen.slabs, scratch, lse, batch.buffers.grad_scale, de_acc, dc, stream);
  if (stats != nullptr)  // every pair recomputed, one chunk per slab
    *stats = DropStats{plan.tiles * plan.token_blocks, plan.tiles * plan.token_blocks, chosen.slabs.count,
                       batch.choice.eps};
  return de_acc;
}

float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, Scratch& scratch, const float* lse,
                               const float* upstream, const DropSettings& settings, void* de, void* dc,
                               cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats,
                               EpsChoice* choice, PlanChoice* ran) {
  const Problem& p = in.problem;
  BatchBackward batch = begin_backward(in, plan, scratch, lse, upstream, settings, stream);
  PlanChoice chosen;
  chosen.plan = settings.plan;
  if (settings.plan != BackwardPlan::kDense)
    chosen = choose_plan(settings.plan, decide_kept_pairs(in, plan, lse, settings, batch,
                                                          s09::de_accumulator(p, batch.buffers, de), dc, host, stream));
  if (choice != nullptr) *choice = batch.eps;  // a forced dense plan decides no eps
  float* de_acc =
      run_backward_plan(in, plan, scratch, lse, settings, chosen, batch, de, dc, stream, side, host, stats);
  if (ran != nullptr) *ran = chosen;
  return de_acc;
}

namespace {

constexpr const char* kSampleRowsItem = "row sample: E rows [sample rows, D]";
constexpr const char* kSampleTargetsItem = "row sample: targets [sample rows]";
constexpr const char* kSampleUpstreamItem = "row sample: upstream gradient [sample rows] (reduction none)";
constexpr const char* kSampleLossItem = "row sample: loss, LSE [2][sample rows]";

bool per_token(const Problem& p) { return p.reduction == Reduction::kNone; }

}  // namespace

void gather_sample_rows(void* dst, const void* src, size_t row_bytes, const RowSample& sample, cudaStream_t stream) {
  CCE_CUDA_CHECK(cudaMemcpy2DAsync(dst, row_bytes, src, row_bytes * static_cast<size_t>(sample.stride), row_bytes,
                                   static_cast<size_t>(sample.rows), cudaMemcpyDeviceToDevice, stream));
}

std::vector<MemoryItem> sample_items(const Problem& p, const RowSample& sample, const DropPlan& sample_plan) {
  const size_t rows = static_cast<size_t>(sample.rows);
  std::vector<MemoryItem> items = {{kSampleRowsItem, rows * static_cast<size_t>(p.d) * p.element_bytes()},
                                   {kSampleTargetsItem, rows * 8},
                                   {kSampleLossItem, rows * 8}};
  if (per_token(p)) items.push_back({kSampleUpstreamItem, rows * 4});
  return concat(items, s10::backward_scratch(p.with_tokens(sample.rows), sample_plan));
}

KeptPairs decide_on_sample(const DeviceInputs& in, const RowSample& sample, const DropPlan& sample_plan,
                           const Scratch& scratch, const float* upstream, const DropSettings& settings,
                           HostTables& host, cudaStream_t stream) {
  const SampleInputs rows = gather_sample(in, sample, scratch, upstream, stream);
  s08::sorted_forward(rows.in, forward_plan(sample_plan), s08::sorted_forward_buffers(scratch), rows.loss, rows.lse,
                      scratch, stream);
  BatchBackward batch = begin_backward(rows.in, sample_plan, scratch, rows.lse, rows.upstream, settings, stream);
  return decide_kept_pairs(rows.in, sample_plan, rows.lse, settings, batch, nullptr, nullptr, host, stream);  // no correction
}

SampleInputs gather_sample(const DeviceInputs& in, const RowSample& sample, const Scratch& scratch,
                           const float* upstream, cudaStream_t stream) {
  const Problem& p = in.problem;
  void* e_rows = scratch.get<void>(kSampleRowsItem);
  int64_t* targets = scratch.get<int64_t>(kSampleTargetsItem);
  gather_sample_rows(e_rows, in.e.get(), static_cast<size_t>(p.d) * p.element_bytes(), sample, stream);
  gather_sample_rows(targets, in.targets.get(), sizeof(int64_t), sample, stream);
  SampleInputs rows;
  rows.in = DeviceInputs::borrow(p.with_tokens(sample.rows), e_rows, in.c.get(), targets);
  rows.upstream = upstream;
  if (per_token(p)) {
    float* gathered = scratch.get<float>(kSampleUpstreamItem);
    gather_sample_rows(gathered, upstream, sizeof(float), sample, stream);
    rows.upstream = gathered;
  }
  rows.loss = scratch.get<float>(kSampleLossItem);
  rows.lse = rows.loss + sample.rows;
  return rows;
}

std::vector<MemoryItem> PlanPerBatchStage::workspace(const Problem& p, bool backward) const {
  if (!backward) return DeterministicProductsStage::workspace(p, false);
  // What the plans that ran have allocated (it stays until released): stage
  // 09's scratch (also before any run), the dense plan's slab after a
  // forward, its chunk before one.
  const std::vector<MemoryItem> sparse = s10::backward_scratch(p, plan_for(p));
  const bool before_forward = scratch_.has(kDenseChunkItem);
  std::vector<MemoryItem> items;
  if (!before_forward || scratch_.has(sparse.front().first)) items = sparse;
  if (scratch_.has(kHeadSlabItem)) items = concat(items, dense_head_items(p, scratch_.has(kHeadDcItem)));
  if (scratch_.has(kDenseSlabItem))
    items = concat(items, dense_slab_items(p, plan_dense_slabs(p, slab_columns_flag_), scratch_.has(kDenseDcSlabItem)));
  if (before_forward)
    items = concat(items, dense_chunk_items(p, plan_dense_chunks(p, chunk_rows_flag_),
                                             scratch_.has(kDenseDcItem) || scratch_.has(kDenseDcWorkspaceItem)));
  if (sample_scratch_.has(kSampleRowsItem)) {  // the sample's own items
    const RowSample sample = plan_row_sample(p);
    items = concat(items, named_apart(sample_items(p, sample, plan_for(p.with_tokens(sample.rows)))));
  }
  return items;
}

std::vector<MemoryItem> named_apart(const std::vector<MemoryItem>& sample) {
  std::vector<MemoryItem> items;
  for (const MemoryItem& item : sample)
    items.push_back({item.first.rfind("row sample: ", 0) == 0 ? item.first : "row sample: " + item.first, item.second});
  return items;
}

GradientApproximation dense_plan_approximation(const PlanChoice& ran) {
  if (ran.before_forward && ran.chunks.logit_bytes == 2)
    return GradientApproximation{0.0, false, kBf16Unit};  // S = α ∘ q, dC from α ∘ E (dense_backward.cu)
  return {};
}

GradientApproximation PlanPerBatchStage::gradient_approximation() const {
  if (ran_.plan == BackwardPlan::kDense) return dense_plan_approximation(ran_);
  return DeterministicProductsStage::gradient_approximation();
}

void PlanPerBatchStage::loss_and_gradient(const DeviceInputs& in, float* loss, float* lse, const float* upstream,
                                          void* de, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!same_model(p, history_problem_)) history_ = PlanHistory{}, history_problem_ = p;
  const BackwardPlan flag = parse_backward_plan(plan_flag_);
  int64_t sample_rows = 0;
  if (decides_on_sample(flag, history_)) {
    const RowSample sample = plan_row_sample(p);
    const DropPlan sample_plan = plan_for(p.with_tokens(sample.rows));
    sample_scratch_.allocate(sample_items(p, sample, sample_plan));
    const KeptPairs pairs = decide_on_sample(in, sample, sample_plan, sample_scratch_, upstream, settings(p.dtype), host_,
                                               stream);
    history_ = PlanHistory::decided(pairs.fraction());
    sample_rows = sample.rows;
  }
  // Each plan's scratch is released when the other one takes over: the peak
  // is the larger plan's, not both.
  if (!dense_before_forward(flag, history_)) {
    if (scratch_.has(kDenseChunkItem)) release_scratch();
    expect_backward(true);
    forward_into_dc(in, dc, loss, lse, stream);
    backward(in, lse, upstream, de, dc, stream);  // records its decision
    return;
  }
  if (!scratch_.has(kDenseChunkItem)) release_scratch();  // the sparse plan's and the slabs', from a decision
  const DenseChunks chunks = plan_dense_chunks(p, chunk_rows_flag_);
  scratch_.allocate(dense_chunk_items(p, chunks, dc != nullptr));
  const DenseTargetRows target_rows = dense_loss_and_gradient(in, chunks, scratch_, loss, lse, upstream, de, dc,
                                                                  dense_read_backs_, stream);
  sorted_c_in_dc_ = false, order_batches_ = -1;  // no sorted forward ran
  ++history_.dense_since;
  last_problem_ = p;
  stats_ready_ = false;
  const DenseBeforeForwardReport report = report_dense_before_forward(
      plan_for(p).tiles * plan_for(p).token_blocks, chunks, target_rows, flag, history_, sample_rows);
  stats_ = report.stats;
  choice_ = report.choice;
  ran_ = report.ran;
}

DenseBeforeForwardReport report_dense_before_forward(int64_t pairs, const DenseChunks& chunks,
                                                     const DenseTargetRows& target_rows, BackwardPlan flag,
                                                     const PlanHistory& history, int64_t sample_rows) {
  DenseBeforeForwardReport report;
  report.stats = DropStats{pairs, pairs, chunks.count, 0.0f};
  report.choice = EpsChoice{0.0f, -1.0, {}};
  report.ran = PlanChoice{BackwardPlan::kDense, flag == BackwardPlan::kDense ? -1.0 : history.kept_fraction, {}, true,
                          chunks, target_rows, sample_rows};
  return report;
}

void PlanPerBatchStage::forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) {
  sorted_c_in_dc_ = false;
  if (!backward_follows_) {  // a loss alone: stage 09's (no sort, no statistics)
    order_batches_ = -1;
    DeterministicProductsStage::forward(in, loss, lse, stream);
    return;
  }
  const Problem& p = in.problem;
  last_problem_ = p;
  stats_ready_ = false;
  const s08::SortedForwardPlan plan = forward_plan(plan_for(p));
  scratch_.allocate(s08::sorted_forward_items(p, plan));
  sorted_forward(in, plan, s08::sorted_forward_buffers(scratch_), loss, lse, stream);
  stats_ready_ = true;
}

void PlanPerBatchStage::sorted_forward(const DeviceInputs& in, const s08::SortedForwardPlan& plan,
                                       const s08::SortedForwardBuffers& buffers, float* loss, float* lse,
                                       cudaStream_t stream) {
  order_batches_ = forward_states_keeping_order(in, plan, buffers, sort_every_flag_, order_age_, stream);
  s08::sorted_forward_finish(in, buffers, loss, lse, scratch_, stream);
}

void PlanPerBatchStage::forward_into_dc(const DeviceInputs& in, void* dc, float* loss, float* lse,
                                        cudaStream_t stream) {
  const Problem& p = in.problem;
  const s08::SortedForwardPlan chunks = forward_plan(plan_for(p));
  const s08::SortedForwardPlan whole = whole_plan_.get(p, [&] { return s08::plan_sorted_forward(p, p.v); });
  // The work buffer, idle while dC holds sorted C, takes the ranges' states
  // (the chunks' item is sized for a chunk's ranges, the whole V may need more).
  const bool fits = dc != nullptr && DeterministicProductsStage::chunk_rows_flag_ == 0 && chunks.chunk_rows < p.v &&
                    reinterpret_cast<uintptr_t>(dc) % 256 == 0 &&
                    whole.work_bytes <= static_cast<size_t>(p.v) * p.d * p.element_bytes() &&
                    static_cast<size_t>(whole.ranges * p.n) * sizeof(float2) <= chunks.work_bytes;
  if (!fits) {
    forward(in, loss, lse, stream);
    return;
  }
  scratch_.allocate(s08::sorted_forward_items(p, chunks));
  s08::SortedForwardBuffers buffers = s08::sorted_forward_buffers(scratch_);
  buffers.range_states = reinterpret_cast<float2*>(buffers.work);
  buffers.work = static_cast<unsigned char*>(dc);  // the sort's temporaries, then sorted C
  sorted_forward(in, whole, buffers, loss, lse, stream);
  last_problem_ = p;
  stats_ready_ = true;
  sorted_c_in_dc_ = true;
}

void PlanPerBatchStage::backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                                 cudaStream_t stream) {
  const Problem& p = in.problem;
  if (!stats_ready_)
    throw InputError(name() + ": backward() needs a forward() told that a backward follows (expect_backward(true))");
  stats_ready_ = false;  // the correction overwrites the statistics
  scratch_.allocate(workspace(p, true));
  const DropSettings planned = planned_from(settings(p.dtype), same_model(p, history_problem_) ? history_ : PlanHistory{});
  grouped_near_eps_ = planned.last_automatic_eps;
  const float* de_acc = s10::backward_to_accumulator(in, plan_for(p), scratch_, lse, upstream, planned, de, dc, stream,
                                                side_, host_, &stats_, &choice_, &ran_);
  if (ran_.kept_fraction >= 0.0) {  // a decision: what the next batch of this problem is planned from
    history_problem_ = p;
    history_ = PlanHistory::decided(ran_.kept_fraction, planned.misplaced_mass > 0.0 ? choice_.eps : 0.0f);
  }
  finish_de(in, s09::backward_buffers(p, plan_for(p), scratch_), de_acc, de, stream);
}

void PlanPerBatchStage::add_options(OptionParser& parser) {
  const std::string eps_help = "drop (token block, tile) pairs whose every softmax entry is below eps; 0 = automatic "
                               "(bf16: the largest of " + candidate_range() + " within --misplaced-mass), 2^-28 (fp32)";
  add_drop_options(parser, eps_help.c_str());  // the parser keeps its own copy
  char budget[16];
  std::snprintf(budget, sizeof budget, "%g", kDefaultMisplacedMass);
  parser.add_double("misplaced-mass", &mass_flag_,
                    "the automatic eps's budget: softmax mass per row that the tail correction of the dropped tiles "
                    "may put on the wrong entries (at most M(1 - M/(|T| p_max)) per tile); 0 = " + std::string(budget));
  parser.add_string("plan", &plan_flag_,
                    "the backward: sparse (stage 09's kept tiles), dense (every tile: with loss and gradient in one "
                    "call 3 GEMMs per chunk of rows, else 3 cuBLAS GEMMs per vocabulary slab after the forward) or "
                    "auto (default: dense when more than a third of the pairs would be kept, and before the forward "
                    "after a dense batch)");
  parser.add_int("dense-slab-columns", &slab_columns_flag_,
                 "the dense plan's vocabulary columns per slab after a forward; 0 = as many as 512 MiB of fp32 "
                 "logits hold");
  parser.add_int("dense-chunk-rows", &chunk_rows_flag_,
                 "the dense plan's rows per chunk before the forward (loss and gradient together); 0 = every "
                 "row if its logits (q in bf16 for bf16 inputs, with the rows of E times alpha; else fp32) fit " +
                     std::to_string(kDefaultDenseScratchBytes >> 20) +
                     " MiB, else as many as fit there beside dC's fp32 accumulator");
  parser.add_int("sort-every", &sort_every_flag_,
                 "sort the vocabulary by C_j·ΣE_i every this many batches of one model, keeping the batch before's "
                 "order in between (1: every batch, as stage 09)");
  parser.add_double("dense-head", &head_share_flag_,
                    "the sparse plan's dense head: the leading sorted tiles each kept by at least this share of the "
                    "token blocks (at least " + std::to_string(kLeastHeadTiles) + " of them) taken whole by cuBLAS "
                    "GEMMs, the sparse plan over the rest; 0 = none (with the automatic eps only)");
  parser.add_flag("no-token-grouping", &no_grouping_,
                  "token blocks of rows in their order (default: rows grouped by how many tiles they need)");
}

void PlanPerBatchStage::validate_options() const {
  DeterministicProductsStage::validate_options();
  if (!(mass_flag_ >= 0.0 && mass_flag_ <= 1.0)) throw InputError("--misplaced-mass must be in [0, 1]");
  parse_backward_plan(plan_flag_);
  if (slab_columns_flag_ < 0) throw InputError("--dense-slab-columns must be >= 0");
  if (chunk_rows_flag_ < 0) throw InputError("--dense-chunk-rows must be >= 0");
  if (sort_every_flag_ < 1 || sort_every_flag_ > 1000000) throw InputError("--sort-every must be in [1, 1000000]");
  if (!(head_share_flag_ >= 0.0 && head_share_flag_ <= 1.0)) throw InputError("--dense-head must be in [0, 1]");
  if (mass_flag_ > 0.0 && (eps_flag_ > 0.0 || keep_all_))
    throw InputError(std::string("--misplaced-mass sets the automatic eps: it contradicts ") +
                     (keep_all_ ? "--keep-all" : "--drop-eps"));
}

std::vector<int> PlanPerBatchStage::token_order() const {
  std::vector<int> order(static_cast<size_t>(last_problem_.n));
  if (order.empty()) return order;
  if (no_grouping_) {
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  } else {
    copy_to_host(order.data(), batch_plan_buffers(last_problem_, scratch_).token_order, order.size() * 4);
  }
  return order;
}

std::string describe_eps(float eps) {
  const int k = candidate_index(eps);
  if (k < 0 || k % kAutoStepsPerExponent == 0) return s08::describe_eps(eps);  // a power of two: stage 08's words
  char between[32];
  std::snprintf(between, sizeof between, "eps 2^%g", candidate_log2_eps(k));
  return between;
}

std::string describe_automatic_eps(const EpsChoice& choice, double budget) {
  char buf[320];
  if (choice.misplaced_mass >= 0.0)
    std::snprintf(buf, sizeof buf, " (automatic: the largest of %s whose tail correction misplaces at most %.3g of "
                  "each row's softmax on average; misplaced %.4f)", candidate_range().c_str(), budget,
                  choice.misplaced_mass);
  else
    std::snprintf(buf, sizeof buf, " (automatic, at most 2^-%d)", kAutoFirstExponent);
  return buf;
}

std::string describe_candidates(const EpsChoice& choice) {
  std::string masses = "candidates   misplaced mass per row at eps " + candidate_range() + ":";
  for (double m : choice.candidates) {
    char one[16];
    std::snprintf(one, sizeof one, " %.4f", m);
    masses += one;
  }
  return masses;
}

std::string describe_plan(const PlanChoice& ran, BackwardPlan flag, const std::string& decides_again) {
  std::string why = ran.kept_fraction < 0.0 ? std::string("--plan dense")
                                            : "the decision keeps " + percent(ran.kept_fraction) + " of the pairs";
  if (ran.kept_fraction >= 0.0 && flag == BackwardPlan::kAuto)
    why += ran.plan == BackwardPlan::kDense ? ", more than " + percent(kDenseAboveKept)
                                            : ", at most " + percent(kDenseAboveKept);
  else if (ran.kept_fraction >= 0.0)
    why += std::string(", --plan ") + to_string(ran.plan);
  char buf[400];
  if (ran.before_forward) {
    const std::string decision = ran.sample_rows > 0
                                     ? "a sample of " + std::to_string(ran.sample_rows) + " rows decided now: it keeps "
                                     : std::string("the last decision kept ");
    const std::string before_why = ran.kept_fraction < 0.0
                                       ? std::string("--plan dense")
                                       : decision + percent(ran.kept_fraction) + " of the pairs, more than " +
                                             percent(kDenseAboveKept) + "; every " +
                                             std::to_string(kDecideEveryBatches) + "th batch decides again " +
                                             decides_again;
    std::snprintf(buf, sizeof buf, "backward     dense before the forward: loss and gradient by 3 GEMMs per "
                  "chunk of %lld rows (%lld chunks, %s logits) (%s)", static_cast<long long>(ran.chunks.rows),
                  static_cast<long long>(ran.chunks.count), ran.chunks.logit_bytes == 2 ? "q bf16" : "fp32",
                  before_why.c_str());
    std::string line = buf;
    if (ran.target_rows.runs > 0)
      line += "; dC's rows of " + std::to_string(ran.target_rows.runs) + " target tokens, " +
              std::to_string(ran.target_rows.whole) + " summed whole in fp32";
    return line;
  }
  if (ran.plan == BackwardPlan::kDense)
    std::snprintf(buf, sizeof buf, "backward     dense: every pair, 3 cuBLAS GEMMs per slab of %lld columns (%lld "
                  "slabs) (%s)", static_cast<long long>(ran.slabs.columns), static_cast<long long>(ran.slabs.count),
                  why.c_str());
  else if (ran.head_tiles > 0)
    std::snprintf(buf, sizeof buf, "backward     sparse with a dense head: the first %lld sorted tiles by cuBLAS GEMMs, "
                  "stage 09's products over the kept pairs after them (%s)", static_cast<long long>(ran.head_tiles),
                  why.c_str());
  else
    std::snprintf(buf, sizeof buf, "backward     sparse: stage 09's products over the kept pairs (%s)", why.c_str());
  std::string line = buf;
  if (ran.plan == BackwardPlan::kSparse && ran.rows_in_token_order)
    line += "; dC's owners read E's rows by TMA from a copy in the token order (in dE's output)";
  return line;
}

std::vector<std::string> PlanPerBatchStage::report_lines() const {
  std::vector<std::string> lines = DeterministicProductsStage::report_lines();  // plan, drop, kept tiles
  if (lines.size() < 2) return lines;
  DropPlan plan = plan_for(last_problem_);
  if (ran_.rows_in_token_order) plan = plan_with_rows_in_de(plan);  // the slots the backward ran with
  if (sorted_c_in_dc_)  // forward_into_dc: one chunk of all V rows, in dC's output
    lines[0] = s09::describe_drop_plan(plan, last_problem_.v) + "; sorted C in dC's output";
  else
    lines[0] = s09::describe_drop_plan(plan, plan.chunk_rows);
  if (order_batches_ == 0)
    lines[0] += "; the vocabulary sorted this batch";
  else if (order_batches_ > 0)
    lines[0] += "; the vocabulary order sorted " + std::to_string(order_batches_) + " batch(es) before (every " +
                std::to_string(sort_every_flag_) + ")";
  const float eps = stats_.tiles > 0 ? stats_.eps : drop_eps(last_problem_.dtype);
  std::string rule = describe_eps(eps);
  if (automatic_eps(last_problem_.dtype)) rule += describe_automatic_eps(choice_, misplaced_mass_budget());
  const std::string grouping = no_grouping_               ? "in row order"
                               : grouped_near_eps_ > 0.0f ? "of rows grouped near the batch before's " +
                                                                describe_eps(grouped_near_eps_)
                                                          : "of grouped rows";
  char buf[400];
  std::snprintf(buf, sizeof buf, "drop         %s; tail correction %s; token blocks %s", rule.c_str(),
                no_correction_ ? "off" : no_dc_correction_ ? "of dE" : "of dE and dC", grouping.c_str());
  lines[1] = buf;
  if (ran_.plan == BackwardPlan::kDense && ran_.kept_fraction < 0.0)
    lines[1] = "drop         none: --plan dense recomputes every pair";
  else if (ran_.before_forward)
    lines[1] = "drop         none: the dense plan computes every pair";
  if (choice_.misplaced_mass >= 0.0) lines.insert(lines.begin() + 2, describe_candidates(choice_));
  if (ran_.kept_fraction >= 0.0 || ran_.plan == BackwardPlan::kDense)
    lines.push_back(describe_plan(ran_, parse_backward_plan(plan_flag_)));
  return lines;
}

std::unique_ptr<Stage> make_stage() { return std::make_unique<PlanPerBatchStage>(); }

}  // namespace cce::s10
