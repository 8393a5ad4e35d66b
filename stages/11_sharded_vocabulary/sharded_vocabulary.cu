// Stage 11's GPUs: the shards, their inputs and outputs, and a step (forward,
// then backward) run by a host thread per GPU. The steps themselves are the
// free functions of stage 08 (the forward), stage 10 (the backward) and stage
// 09 (add_target_terms), with combine.cu's collectives between them.
#include "stages/11_sharded_vocabulary/sharded_vocabulary.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <thread>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/mapped_value.h"
#include "common/timer.h"
#include "stages/04_indexed_dot/indexed_dot.h"

namespace cce::s11 {
namespace {

std::vector<uint8_t> download_bytes(const void* src, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes > 0) copy_to_host(out.data(), src, bytes);
  return out;
}

}  // namespace

std::vector<ShardRange> shard_vocabulary(int64_t v, int shards) {
  std::vector<ShardRange> ranges(static_cast<size_t>(shards));
  const int64_t base = v / shards, longer = v % shards;
  int64_t begin = 0;
  for (int p = 0; p < shards; ++p) {
    const int64_t rows = base + (p < longer ? 1 : 0);
    ranges[p] = {begin, begin + rows};
    begin += rows;
  }
  return ranges;
}

void validate_shard_count(const Problem& p, int64_t shards) {
  if (shards < 1) throw InputError("--gpus must be at least 1 (got " + std::to_string(shards) + ")");
  const int64_t cols = s08::backward_tile(p.dtype), tiles = (p.v + cols - 1) / cols;
  if (shards > tiles)
    throw InputError("--gpus " + std::to_string(shards) + ": V=" + std::to_string(p.v) + " has " +
                     std::to_string(tiles) + " vocabulary tile" + (tiles == 1 ? "" : "s") + " of " +
                     std::to_string(cols) + " (" + to_string(p.dtype) +
                     "), fewer than the shards; use at most " + std::to_string(tiles));
}

void validate_shards(const Problem& p, int shards, int gpus_present) {
  validate_shard_count(p, shards);
  if (shards > gpus_present)
    throw InputError("--gpus " + std::to_string(shards) + ": this machine has " + std::to_string(gpus_present) +
                     " CUDA GPU" + (gpus_present == 1 ? "" : "s"));
}

struct ShardedVocabulary::Rank {
  int device = 0;
  ShardRange range;
  Problem local;  // V = the shard's rows
  s10::DropPlan plan;
  s10::DropPlan sample_plan;  // for the rows of stage 10's sample (plan_row_sample), made with plan
  DeviceInputs in;                // E, the shard of C, the targets as the shard sees them
  DeviceBuffer<int64_t> targets;  // the targets themselves
  DeviceBuffer<int64_t> dot_targets;  // targets_for_dot: the dense plan's target logit, this shard's part
  s10::DenseReadBacks dense_read_backs;
  DeviceBuffer<float> loss, lse, upstream;
  DeviceBuffer<uint8_t> de, dc;  // dE [N,D], the shard's dC [V_p,D]
  Scratch scratch;
  s10::VocabularyOrderAge order_age;  // of the vocabulary order that scratch holds (released with it)
  Scratch sample_scratch;  // the sample decision's (sample_items), kept once made, as stage 10 keeps its own
  s10::SideStream side;
  s10::HostTables host;
  s10::DropStats stats;
  s10::EpsChoice choice;  // the last backward's, from the joined statistics
  s10::PlanChoice ran;
  s10::KeptPairs joined;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  // A pair of events around each collective of the last step (made as a step needs them), which last_nccl_ms adds up.
  std::vector<cudaEvent_t> nccl_events;
  size_t nccl_timed = 0;  // the pairs the last step used
  size_t baseline = 0;  // tracked bytes on this GPU before its inputs (the cuBLAS workspace)

  MappedHostValue<std::array<int64_t, 2>> joined_on_host;  // join_kept_pairs' kept pairs and pairs

  size_t input_bytes() const { return in.bytes() + targets.bytes() + dot_targets.bytes(); }
  // The scratch released, and with it the vocabulary order it kept (as stage 10's release_scratch).
  void release_scratch() { scratch.release(), order_age = {}; }
  // Event pairs for `pairs` collectives (made before a step's first one: see step()).
  void reserve_nccl_events(size_t pairs) {
    for (size_t k = nccl_events.size(); k < 2 * pairs; ++k) {
      nccl_events.push_back(nullptr);
      CCE_CUDA_CHECK(cudaEventCreate(&nccl_events.back()));
    }
  }
  // `collective` (NCCL calls, and the kernels between them) between the next pair of events on the stream.
  template <typename Collective>
  void in_nccl(const Collective& collective) {
    reserve_nccl_events(nccl_timed + 1);
    CCE_CUDA_CHECK(cudaEventRecord(nccl_events[2 * nccl_timed], stream));
    collective();
    CCE_CUDA_CHECK(cudaEventRecord(nccl_events[2 * nccl_timed + 1], stream));
    ++nccl_timed;
  }
  ~Rank() {  // the device is current (see ~ShardedVocabulary); errors at teardown are ignored
    for (cudaEvent_t event : nccl_events)
      if (event != nullptr) cudaEventDestroy(event);
    if (comm != nullptr) ncclCommDestroy(comm);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

template <typename Step>
void ShardedVocabulary::on_every_gpu(const Step& step) const {
  std::vector<std::exception_ptr> errors(ranks_.size());
  std::vector<std::thread> threads;
  for (size_t p = 0; p < ranks_.size(); ++p) {
    threads.emplace_back([&, p] {
      try {
        CCE_CUDA_CHECK(cudaSetDevice(ranks_[p]->device));
        step(*ranks_[p]);
      } catch (...) {
        errors[p] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto& error : errors)
    if (error) std::rethrow_exception(error);
}

ShardedVocabulary::ShardedVocabulary(const Problem& problem, const HostInputs& inputs,
                                     const std::vector<float>& upstream, int gpus, const ShardOptions& options)
    : problem_(problem), upstream_(upstream), options_(options) {
  int present = 0;
  if (cudaGetDeviceCount(&present) != cudaSuccess) {
    cudaGetLastError();
    present = 0;
  }
  validate_shards(problem, gpus, present);
  validate_inputs(problem, inputs);
  const size_t per_token = problem.reduction == Reduction::kNone ? static_cast<size_t>(problem.n) : 1;
  if (upstream.size() != per_token) throw InputError("upstream gradient must have " + std::to_string(per_token) + " values");

  // NVLink multicast (NVLS) stays off: on a shared host, multicast objects
  // can take the GPUs out of service. Set before NCCL reads its environment.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  std::vector<ncclComm_t> comms(static_cast<size_t>(gpus));
  std::vector<int> devices(static_cast<size_t>(gpus));
  for (int p = 0; p < gpus; ++p) devices[p] = p;
  check_nccl(ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");

  const std::vector<ShardRange> ranges = shard_vocabulary(problem.v, gpus);
  for (int p = 0; p < gpus; ++p) {
    ranks_.push_back(std::make_unique<Rank>());
    Rank& r = *ranks_.back();
    r.device = p;
    r.comm = comms[p];
    r.range = ranges[p];
    r.local = problem;
    r.local.v = r.range.rows();
    // Here, on one thread: options.plan may keep its last answer (stage 10's plan_for), not for threads at once.
    r.plan = options.plan(r.local);
    r.sample_plan = options.plan(r.local.with_tokens(s10::plan_row_sample(problem).rows));
  }
  on_every_gpu([&](Rank& r) {
    cublas_handle();  // a fixed per-GPU cost: kept out of the stage's numbers
    r.baseline = AllocationTracker::current_bytes();
    CCE_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
    r.in.problem = r.local;
    r.in.e = upload_values(inputs.e.data(), inputs.e.size(), problem.dtype);
    r.in.c = upload_values(inputs.c.data() + r.range.begin * problem.d,
                           static_cast<size_t>(r.range.rows() * problem.d), problem.dtype);
    const std::vector<int64_t> local_targets = shard_targets(problem, inputs.targets, r.range);
    r.in.targets = DeviceBuffer<int64_t>(local_targets.size());
    copy_to_device(r.in.targets.get(), local_targets.data(), local_targets.size() * 8);
    r.targets = DeviceBuffer<int64_t>(inputs.targets.size());
    copy_to_device(r.targets.get(), inputs.targets.data(), inputs.targets.size() * 8);
    const std::vector<int64_t> dot_targets = targets_for_dot(problem, inputs.targets, r.range);
    r.dot_targets = DeviceBuffer<int64_t>(dot_targets.size());
    copy_to_device(r.dot_targets.get(), dot_targets.data(), dot_targets.size() * 8);
    r.loss = DeviceBuffer<float>(per_token);
    r.lse = DeviceBuffer<float>(static_cast<size_t>(problem.n));
    // The page-locked values the steps read back, made here, before any collective (see step()).
    r.dense_read_backs.too_far.get();
    r.dense_read_backs.runs.get();
    r.dense_read_backs.whole.get();
    r.joined_on_host.get();
  });
  AllocationTracker::reset_peak();
}

ShardedVocabulary::~ShardedVocabulary() {
  for (auto& rank : ranks_) {
    cudaSetDevice(rank->device);  // its buffers, stream and communicator belong to it
    rank.reset();
  }
  cudaSetDevice(0);
}

ShardRange ShardedVocabulary::shard(int p) const { return ranks_.at(static_cast<size_t>(p))->range; }

void ShardedVocabulary::poison_outputs() {
  on_every_gpu([](Rank& r) {
    poison_device(r.loss.get(), r.loss.bytes());
    poison_device(r.lse.get(), r.lse.bytes());
    if (r.de.get()) poison_device(r.de.get(), r.de.bytes());
    if (r.dc.get()) poison_device(r.dc.get(), r.dc.bytes());
    CCE_CUDA_CHECK(cudaDeviceSynchronize());
  });
}

void ShardedVocabulary::step(bool backward) {
  // As stage 10's loss_and_gradient plans a batch: dense before the forward
  // after a batch whose decision kept more than a third of the pairs; every
  // kDecideEveryBatches-th batch of a dense run decides again on a sample of
  // its rows first (its forward on every shard, then the joined decision).
  // What a step allocates (scratch, events) is made on every GPU first, in an
  // on_every_gpu of its own that every thread leaves before any enqueues a
  // collective: such driver calls may wait for a device or a driver-wide
  // lock, and none should run while another GPU waits in a collective that
  // this thread has yet to enqueue.
  int64_t sample_rows = 0;
  if (backward && s10::decides_on_sample(options_.drop.plan, history_)) {
    on_every_gpu([&](Rank& r) {
      r.sample_scratch.allocate(sample_items(r));
      r.reserve_nccl_events(r.nccl_timed + kDecisionCollectives);
    });
    on_every_gpu([&](Rank& r) { r.joined = decide_on_sample(r); });
    const s10::KeptPairs& sampled = ranks_.front()->joined;
    history_ = s10::PlanHistory::decided(sampled.fraction());
    sample_rows = s10::plan_row_sample(problem_).rows;
  }
  const bool dense_first = backward && s10::dense_before_forward(options_.drop.plan, history_);
  on_every_gpu([&](Rank& r) {
    if (backward && !r.de.get()) {  // on the first backward: a loss alone does not pay for dE, dC
      r.upstream = DeviceBuffer<float>(upstream_.size());
      copy_to_device(r.upstream.get(), upstream_.data(), upstream_.size() * 4);
      r.de = DeviceBuffer<uint8_t>(static_cast<size_t>(r.local.n * r.local.d) * r.local.element_bytes());
      r.dc = DeviceBuffer<uint8_t>(static_cast<size_t>(r.local.v * r.local.d) * r.local.element_bytes());
      poison_device(r.de.get(), r.de.bytes());
      poison_device(r.dc.get(), r.dc.bytes());
    }
    r.nccl_timed = 0;
    // Each plan's scratch is released when the other one takes over: the peak is the larger plan's.
    if (r.scratch.has(s10::kDenseChunkItem) != dense_first) r.release_scratch();
    if (dense_first) {
      r.scratch.allocate(dense_step_items(r.local));
      r.reserve_nccl_events(kDenseChunkCollectives * static_cast<size_t>(dense_chunks(r.local).count));
    } else {
      r.scratch.allocate(concat(backward ? s10::backward_scratch(r.local, r.plan)
                                         : s08::sorted_forward_items(r.local, s10::forward_plan(r.plan)),
                                combine_scratch(r.local)));
      r.reserve_nccl_events(kDecisionCollectives + 2);  // and the row states', dE's
    }
  });
  on_every_gpu([&](Rank& r) {
    if (dense_first) {
      dense_step(r, sample_rows);
      CCE_CUDA_CHECK(cudaStreamSynchronize(r.stream));
      return;
    }
    s10::forward_states_keeping_order(r.in, s10::forward_plan(r.plan), s08::sorted_forward_buffers(r.scratch),
                                      options_.drop.sort_every, r.order_age, r.stream);
    r.in_nccl([&] {
      combine_row_states(problem_, r.targets.get(), r.scratch, r.comm, r.loss.get(), r.lse.get(), r.stream);
    });
    if (backward) {
      float* de_acc = backward_to_accumulator(r);
      s10::add_target_terms(r.in, s09::backward_buffers(r.local, r.plan, r.scratch), de_acc, r.stream);
      r.in_nccl([&] { reduce_de(problem_, de_acc, r.de.get(), r.comm, r.stream); });
    }
    CCE_CUDA_CHECK(cudaStreamSynchronize(r.stream));
  });
  if (!backward) return;
  const s10::PlanChoice& ran = ranks_.front()->ran;
  if (dense_first)
    ++history_.dense_since;
  else if (ran.kept_fraction >= 0.0)  // a decision: what the next step is planned from
    history_ = s10::PlanHistory::decided(ran.kept_fraction,
                                         options_.drop.misplaced_mass > 0.0 ? ranks_.front()->choice.eps : 0.0f);
}

// Stage 10's dense plan before the forward (dense_loss_and_gradient's steps),
// each shard over its vocabulary, joined per chunk of rows where a row needs
// every shard: R_i, the target logit, from each shard's part (0 off its
// shard) summed; the LSE from each shard's fold, joined as the forward's row
// states are, before α_i = g_i·exp(R_i − LSE_i) scales the chunk; dE's rows
// summed in fp32 and rounded once. dC's rows are complete on their shard.
void ShardedVocabulary::dense_step(Rank& r, int64_t sample_rows) const {
  const Problem& p = r.local;
  const bool q = s10::keeps_q(p);
  const s10::DenseChunks chunks = dense_chunks(p);  // its scratch: step() made it on every GPU
  float* shard_lse = r.scratch.get<float>(kShardLseItem);
  s10::DenseCall call = s10::begin_dense_chunks(r.in, chunks, r.scratch, r.loss.get(), r.upstream.get(), true,
                                                r.dense_read_backs, r.stream);
  for (int64_t first = 0; first < p.n; first += chunks.rows) {
    const s10::DenseChunk chunk = s10::dense_chunk(r.in, call, r.scratch, first);
    const int64_t rows = chunk.rows.problem.n;
    float* lse = r.lse.get() + first;
    float* per_token = call.per_token + first;
    if (q) {
      const DeviceInputs dot = DeviceInputs::borrow(chunk.rows.problem, chunk.rows.e.get(), chunk.rows.c.get(),
                                                    r.dot_targets.get() + first);
      s04::indexed_dot(dot, s04::DotVariant::k1d, call.reference, r.stream);
      r.in_nccl([&] { sum_over_shards(call.reference, rows, r.comm, r.stream); });
      s10::set_chunk_reference(chunk, call, r.stream);
    }
    s10::fold_chunk(chunk, call, shard_lse, nullptr, r.stream);
    r.in_nccl([&] { join_chunk_lse(chunk, r.scratch, r.targets.get() + first, r.comm, lse, per_token, r.stream); });
    if (q && s10::reference_too_far(chunk, call, lse, r.dense_read_backs, r.stream)) {  // the same answer on every GPU
      s10::refold_chunk_at_lse(chunk, call, lse, shard_lse, nullptr, r.stream);
      r.in_nccl([&] { join_chunk_lse(chunk, r.scratch, r.targets.get() + first, r.comm, lse, per_token, r.stream); });
    }
    s10::chunk_products(chunk, call, r.in, lse, r.de.get(), r.dc.get(), r.dense_read_backs, r.stream);
    float* de_sums = s10::chunk_de_sums(chunk, call, r.de.get(), r.stream);
    void* de_rows = static_cast<unsigned char*>(r.de.get()) + first * p.d * p.element_bytes();
    r.in_nccl([&] { sum_and_round_de(p.dtype, rows * p.d, de_sums, de_rows, r.comm, r.stream); });
  }
  const s10::DenseTargetRows target_rows = s10::finish_dense_chunks(r.in, call, r.loss.get(), r.dc.get(), r.stream);
  const s10::DenseBeforeForwardReport report = s10::report_dense_before_forward(
      r.plan.tiles * r.plan.token_blocks, chunks, target_rows, options_.drop.plan, history_, sample_rows);
  r.stats = report.stats;
  r.choice = report.choice;
  r.ran = report.ran;
  if (sample_rows == 0) r.joined = s10::KeptPairs{};  // else the sample's, which decided
}

s10::DenseChunks ShardedVocabulary::dense_chunks(const Problem& local) const {
  return s10::plan_dense_chunks(local, options_.drop.dense_chunk_rows);
}

std::vector<MemoryItem> ShardedVocabulary::dense_step_items(const Problem& local) const {
  return concat(concat(s10::dense_chunk_items(local, dense_chunks(local), true), combine_scratch(local)),
                dense_join_scratch(local));
}

// Stage 10's backward_to_accumulator, step by step, with the statistics its
// choices read joined across the shards in between: every GPU then chooses
// from the same sums, and so chooses the same eps and plan. With one GPU the
// all-reduces leave the numbers as they are: stage 10's choice, bit for bit.
float* ShardedVocabulary::backward_to_accumulator(Rank& r) const {
  const s10::DropSettings settings = s10::planned_from(options_.drop, history_);
  const float* lse = r.lse.get();
  s10::BatchBackward batch = s10::begin_backward(r.in, r.plan, r.scratch, lse, r.upstream.get(), settings, r.stream);
  r.choice = s10::EpsChoice{settings.eps, -1.0, {}};  // a forced dense plan decides no eps
  r.ran = s10::PlanChoice{};
  r.ran.plan = settings.plan;
  r.joined = s10::KeptPairs{};
  if (settings.plan != s10::BackwardPlan::kDense) {
    r.joined = joined_decision(r, settings, r.in, r.plan, r.scratch, lse, batch,
                               s09::de_accumulator(r.local, batch.buffers, r.de.get()), r.dc.get());
    r.choice = batch.eps;
    r.ran = s10::choose_plan(settings.plan, r.joined);
  }
  return s10::run_backward_plan(r.in, r.plan, r.scratch, lse, settings, r.ran, batch, r.de.get(), r.dc.get(), r.stream,
                                r.side, r.host, &r.stats);
}

s10::KeptPairs ShardedVocabulary::joined_decision(Rank& r, const s10::DropSettings& settings, const DeviceInputs& in,
                                                  const s10::DropPlan& plan, const Scratch& scratch, const float* lse,
                                                  s10::BatchBackward& batch, float* de_acc, void* dc) const {
  s10::measure_for_decision(in.problem, plan, lse, settings, batch, r.host, r.stream);
  if (settings.misplaced_mass > 0.0)
    r.in_nccl([&] { join_misplaced_mass(batch.plan_buffers.misplaced_mass, r.comm, r.stream); });
  if (s10::regroups(settings, batch)) {  // every shard regroups near the eps the joined masses choose
    s10::regroup_for_decision(in.problem, plan, lse, settings, batch, r.stream);
    r.in_nccl([&] { join_misplaced_mass(batch.plan_buffers.misplaced_mass, r.comm, r.stream); });
  }
  const s10::KeptPairs local = s10::finish_decision(in, plan, lse, settings, batch, de_acc, dc, r.host, r.stream);
  s10::KeptPairs joined;
  r.in_nccl([&] { joined = join_kept_pairs(local, scratch, r.joined_on_host.get()->data(), r.comm, r.stream); });
  return joined;
}

// Stage 10's decide_on_sample with the shards joined: the same rows on every
// GPU (E and the targets are whole on each), each shard's forward over its
// vocabulary joined into the sample's LSE (combine_row_states, as a step's
// forward), then the joined decision, with nothing corrected.
s10::KeptPairs ShardedVocabulary::decide_on_sample(Rank& r) const {
  const s10::RowSample sample = s10::plan_row_sample(problem_);
  const s10::DropPlan& plan = r.sample_plan;  // its scratch: step() made it on every GPU
  const s10::SampleInputs rows = s10::gather_sample(r.in, sample, r.sample_scratch, r.upstream.get(), r.stream);
  int64_t* targets = r.sample_scratch.get<int64_t>(kSampleTargetsItem);  // the targets themselves, for the join
  s10::gather_sample_rows(targets, r.targets.get(), sizeof(int64_t), sample, r.stream);
  s08::sorted_forward_states(rows.in, s10::forward_plan(plan), s08::sorted_forward_buffers(r.sample_scratch), r.stream);
  r.in_nccl([&] {
    combine_row_states(problem_.with_tokens(sample.rows), targets, r.sample_scratch, r.comm, rows.loss, rows.lse,
                       r.stream);
  });
  s10::BatchBackward batch =
      s10::begin_backward(rows.in, plan, r.sample_scratch, rows.lse, rows.upstream, options_.drop, r.stream);
  return joined_decision(r, options_.drop, rows.in, plan, r.sample_scratch, rows.lse, batch, nullptr, nullptr);
}

std::vector<MemoryItem> ShardedVocabulary::sample_items(const Rank& r) const {
  const s10::RowSample sample = s10::plan_row_sample(r.local);
  const Problem rows = r.local.with_tokens(sample.rows);
  return concat(concat(s10::sample_items(r.local, sample, r.sample_plan), combine_scratch(rows)),
                {{kSampleTargetsItem, static_cast<size_t>(sample.rows) * 8}});
}

void ShardedVocabulary::forward() { step(false); }
void ShardedVocabulary::forward_backward() { step(true); }

double ShardedVocabulary::last_nccl_ms() const {
  const Rank& r = *ranks_.front();
  CCE_CUDA_CHECK(cudaSetDevice(r.device));
  double total = 0.0;
  for (size_t k = 0; k < r.nccl_timed; ++k) {
    float ms = 0.0f;
    CCE_CUDA_CHECK(cudaEventElapsedTime(&ms, r.nccl_events[2 * k], r.nccl_events[2 * k + 1]));
    total += ms;
  }
  return total;
}

namespace {
ShardedVocabulary::StepTimes time_steps(const std::function<void()>& step, int iters, int warmup) {
  for (int i = 0; i < warmup; ++i) step();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    step();  // returns once every GPU's stream is done
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  ShardedVocabulary::StepTimes times;
  if (ms.empty()) return times;
  times.median_ms = median(ms);
  for (const double t : ms) times.mean_ms += t / static_cast<double>(ms.size());
  times.max_ms = *std::max_element(ms.begin(), ms.end());
  times.each_ms = std::move(ms);
  return times;
}
}  // namespace

ShardedVocabulary::StepTimes ShardedVocabulary::time_forward_ms(int iters, int warmup) {
  return time_steps([&] { forward(); }, iters, warmup);
}
ShardedVocabulary::StepTimes ShardedVocabulary::time_forward_backward_ms(int iters, int warmup) {
  return time_steps([&] { forward_backward(); }, iters, warmup);
}

HostOutputs ShardedVocabulary::download() const {
  HostOutputs out;
  const Rank& first = *ranks_.front();
  CCE_CUDA_CHECK(cudaSetDevice(first.device));
  out.loss.resize(first.loss.size());
  out.lse.resize(first.lse.size());
  copy_to_host(out.loss.data(), first.loss.get(), first.loss.bytes());
  copy_to_host(out.lse.data(), first.lse.get(), first.lse.bytes());
  if (first.de.get()) {
    out.de = download_values(first.de, problem_.dtype);
    out.dc.reserve(static_cast<size_t>(problem_.v * problem_.d));
    for (const auto& rank : ranks_) {  // the shards in vocabulary order
      CCE_CUDA_CHECK(cudaSetDevice(rank->device));
      const std::vector<float> shard = download_values(rank->dc, problem_.dtype);
      out.dc.insert(out.dc.end(), shard.begin(), shard.end());
    }
  }
  CCE_CUDA_CHECK(cudaSetDevice(first.device));
  return out;
}

bool ShardedVocabulary::replicas_agree(bool backward) const {
  auto bytes_of = [&](const Rank& r) {
    CCE_CUDA_CHECK(cudaSetDevice(r.device));
    std::vector<uint8_t> all = download_bytes(r.loss.get(), r.loss.bytes());
    const std::vector<uint8_t> lse = download_bytes(r.lse.get(), r.lse.bytes());
    all.insert(all.end(), lse.begin(), lse.end());
    if (backward) {
      const std::vector<uint8_t> de = download_bytes(r.de.get(), r.de.bytes());
      all.insert(all.end(), de.begin(), de.end());
    }
    return all;
  };
  const std::vector<uint8_t> reference = bytes_of(*ranks_.front());
  bool agree = true;
  for (size_t p = 1; p < ranks_.size(); ++p) agree = agree && bytes_of(*ranks_[p]) == reference;
  CCE_CUDA_CHECK(cudaSetDevice(ranks_.front()->device));
  return agree;
}

std::vector<size_t> ShardedVocabulary::peak_beyond_inputs() const {
  std::vector<size_t> peaks;
  for (const auto& r : ranks_) peaks.push_back(AllocationTracker::peak_bytes(r->device) - r->baseline - r->input_bytes());
  return peaks;
}

std::vector<size_t> ShardedVocabulary::input_bytes() const {
  std::vector<size_t> bytes;
  for (const auto& r : ranks_) bytes.push_back(r->input_bytes());
  return bytes;
}

void ShardedVocabulary::reset_peak_memory() {
  on_every_gpu([](Rank& r) {
    r.release_scratch();
    r.sample_scratch.release();
  });
  AllocationTracker::reset_peak();
}

std::vector<MemoryItem> ShardedVocabulary::memory_model(int p, bool backward) const {
  const Rank& r = *ranks_.at(static_cast<size_t>(p));
  // What a step made stays allocated: the sample decision's own scratch too, once a run of dense steps decided again.
  const std::vector<MemoryItem> sampled =
      r.sample_scratch.has(kSampleTargetsItem) ? s10::named_apart(sample_items(r)) : std::vector<MemoryItem>{};
  if (backward && r.scratch.has(s10::kDenseChunkItem))
    return concat(concat(output_memory(r.local, true), dense_step_items(r.local)), sampled);
  std::vector<MemoryItem> items =
      concat(concat(output_memory(r.local, backward), backward ? s10::backward_scratch(r.local, r.plan)
                                                               : s08::sorted_forward_items(r.local, s10::forward_plan(r.plan))),
             combine_scratch(r.local));
  // A backward that ran the dense plan added its slab (and it stays until released), as in stage 10.
  if (backward && r.scratch.has(s10::kDenseSlabItem))
    items = concat(items, s10::dense_slab_items(r.local, s10::plan_dense_slabs(r.local, options_.drop.dense_slab_columns),
                                                r.scratch.has(s10::kDenseDcSlabItem)));
  return concat(items, sampled);
}

s10::EpsChoice ShardedVocabulary::eps_choice() const { return ranks_.front()->choice; }
s10::PlanChoice ShardedVocabulary::plan_choice() const { return ranks_.front()->ran; }
s10::KeptPairs ShardedVocabulary::joined_kept_pairs() const { return ranks_.front()->joined; }

bool ShardedVocabulary::choices_agree() const {
  const Rank& first = *ranks_.front();
  for (const auto& r : ranks_)
    if (r->choice.eps != first.choice.eps || r->choice.misplaced_mass != first.choice.misplaced_mass ||
        r->choice.candidates != first.choice.candidates || r->ran.plan != first.ran.plan ||
        r->ran.kept_fraction != first.ran.kept_fraction)
      return false;
  return true;
}

s10::DropStats ShardedVocabulary::drop_stats() const {
  s10::DropStats total;
  for (const auto& r : ranks_) {
    total.tiles += r->stats.tiles;
    total.kept_tiles += r->stats.kept_tiles;
    total.chunks += r->stats.chunks;
  }
  return total;
}

}  // namespace cce::s11
