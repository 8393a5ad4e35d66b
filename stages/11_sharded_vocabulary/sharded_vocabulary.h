// Stage 11: the vocabulary sharded over GPUs, combined with NCCL.
// Uses: stage 10 (its sorted forward with tile statistics, its whole backward
// up to the fp32 dE accumulator, its dense plan before the forward in steps),
// stage 04 (the indexed dot), common (problem, reference, tracker), NCCL.
//
// Tensor parallelism cuts C [V,D] by rows into P shards, one per GPU, while E
// and the targets are the same on every GPU. Per step:
//   forward   every GPU runs stage 10's sorted forward on its shard: per row
//             i a partial (m_i^p, s_i^p) and, where t_i is in the shard, the
//             target logit; then two all-reduces of O(N) floats:
//               M_i = max_p m_i^p                         (ncclMax, N floats)
//               S_i = Σ_p s_i^p·exp(m_i^p − M_i), z_i = Σ_p z_i^p  (ncclSum, 2N)
//             LSE_i = M_i + log S_i, loss_i = LSE_i − z_i on every GPU;
//   backward  every GPU runs stage 10's backward on its shard with the full
//             LSE, with the plan chosen once for all shards: each shard
//             measures stage 10's statistics on its tiles (the misplaced mass
//             per candidate eps, then the kept pairs at the chosen eps), two
//             small all-reduces sum them, and every GPU makes stage 10's
//             choice (eps, sparse or dense) from the same sums. Its dC rows
//             are complete and stay where they are; its dE is a partial sum
//             over its vocabulary, all-reduced in fp32 (N·D floats) and
//             rounded once.
// After a step whose decision kept more than a third of the pairs, the next
// one runs stage 10's dense plan before the forward on each shard instead
// (dense_step): per chunk of rows, the target logit summed over the shards,
// the LSE joined as above, dE's rows summed; three products, not four.
// Every 16th step of such a run decides again first, as stage 10 does, on a
// sample of rows (decide_on_sample): its forward joined, then the decision.
// One process drives every GPU, a host thread per GPU (ncclCommInitAll):
// stage 10's backward reads its kept-tile lists on the host, so each GPU
// needs a thread of its own to stay busy. README.md gives the reasons and the costs.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/runner.h"
#include "common/stage.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s11 {

// Rows [begin, end) of C on one GPU: the first V mod P shards one row longer.
struct ShardRange {
  int64_t begin = 0, end = 0;
  int64_t rows() const { return end - begin; }
};
std::vector<ShardRange> shard_vocabulary(int64_t v, int shards);

// Throws InputError (one line) for shard counts the problem cannot take:
// fewer than 1, more than the vocabulary's tiles (checked before any GPU
// work), more than the GPUs present.
void validate_shard_count(const Problem& problem, int64_t shards);
void validate_shards(const Problem& problem, int shards, int gpus_present);

// ---- combine.cu: the kernels and collectives that join the shards ----

// Throws CudaError naming the call when an NCCL call fails.
void check_nccl(ncclResult_t status, const char* what);

// A target outside the shard becomes rows(): one past the shard's last entry,
// a valid target (it counts for the mean) that lies in none of its tiles.
std::vector<int64_t> shard_targets(const Problem& problem, const std::vector<int64_t>& targets, ShardRange range);
// For the target logit's part by stage 04's indexed dot: a target outside the
// shard becomes ignore_index (its dot 0 here), one inside it as shard_targets.
std::vector<int64_t> targets_for_dot(const Problem& problem, const std::vector<int64_t>& targets, ShardRange range);

constexpr const char* kRowMaxItem = "row max of every shard [N]";
constexpr const char* kRescaledSumsItem = "rescaled sums, target logits [2][N]";
std::vector<MemoryItem> combine_scratch(const Problem& problem);
// From the shard's row states (stage 10's sorted_forward_states) to the full
// LSE and loss on this GPU; every GPU of the communicator calls it.
// `global` is the unsharded problem, `targets` its targets on this GPU.
void combine_row_states(const Problem& global, const int64_t* targets, const Scratch& scratch, ncclComm_t comm,
                        float* loss, float* lse, cudaStream_t stream);
// dE: the shards' fp32 accumulators summed in place, then rounded into `de`.
void reduce_de(const Problem& global, float* de_acc, void* de, ncclComm_t comm, cudaStream_t stream);
// `count` fp32 sums of dE's rows summed over the shards in place, then rounded into `de` (fp32: they are dE).
void sum_and_round_de(Dtype dtype, int64_t count, float* sums, void* de, ncclComm_t comm, cudaStream_t stream);
// values [count] summed over the shards, in place.
void sum_over_shards(float* values, int64_t count, ncclComm_t comm, cudaStream_t stream);

// The dense plan before the forward (sharded_vocabulary.cu, dense_step): a
// chunk's LSE from each shard's fold, joined as the forward's row states are.
constexpr const char* kShardLseItem = "dense plan: the shard's LSE of a chunk's rows [N]";
constexpr const char* kShardStatesItem = "dense plan: a chunk's row states (LSE, 1) on this shard [N]";
constexpr const char* kShardTargetPartItem = "dense plan: a chunk's target logits on this shard [N]";
std::vector<MemoryItem> dense_join_scratch(const Problem& problem);
// A run of dense steps decides again on a sample of rows (stage 10's), whose
// forward is joined as a step's: the sample's targets themselves, beside the shard's.
constexpr const char* kSampleTargetsItem = "row sample: the targets themselves [sample rows]";
// After s10::fold_chunk put the shard's LSE of the chunk's rows into
// kShardLseItem: the full LSE and per-token losses of those rows (lse,
// per_token: theirs), the same on every GPU. `targets`: the chunk's own, unsharded.
void join_chunk_lse(const s10::DenseChunk& chunk, const Scratch& scratch, const int64_t* targets, ncclComm_t comm,
                    float* lse, float* per_token, cudaStream_t stream);

// The plan's statistics joined, so that every GPU chooses from the same numbers:
// the automatic eps's masses (stage 10's batch_plan_buffers().misplaced_mass,
// measured there) summed in place; the rows with a gradient after them are
// the same on every GPU and are not summed.
void join_misplaced_mass(unsigned long long* mass, ncclComm_t comm, cudaStream_t stream);
// The kept pairs and the pairs summed over the shards (through the combine's
// scratch item kJoinItem and `host`, two page-locked values: no pageable copy
// while another GPU may wait in the all-reduce); waits for the stream.
s10::KeptPairs join_kept_pairs(const s10::KeptPairs& local, const Scratch& scratch, int64_t* host, ncclComm_t comm,
                               cudaStream_t stream);
// Collectives a decision joins (the row states of its forward, the misplaced
// mass, the kept pairs), and a dense step's per chunk of rows at most (the
// target logits, the LSE twice, dE's rows): their events are made up front.
constexpr size_t kDecisionCollectives = 3, kDenseChunkCollectives = 4;
constexpr const char* kJoinItem = "kept pairs, pairs of every shard [2]";
// What those all-reduces compute, on the host (the CPU tests' model of them):
// masses, kept pairs and pairs summed; the rows with a gradient the first shard's.
s10::MisplacedMass join_misplaced_mass(const std::vector<s10::MisplacedMass>& shards);
s10::KeptPairs join_kept_pairs(const std::vector<s10::KeptPairs>& shards);

// ---- sharded_vocabulary.cu: P GPUs, a thread each ----

struct ShardOptions {
  s10::DropSettings drop;  // eps (fixed, or automatic), plan, tail correction (stage 10's flags)
  // Each shard's plan from its own problem (stage 10's --chunk-rows, --slot-mb).
  std::function<s10::DropPlan(const Problem&)> plan = [](const Problem& p) { return s10::plan_drop(p); };
};

class ShardedVocabulary {
 public:
  // Uploads E and the targets to every GPU and C's shard p to GPU p.
  ShardedVocabulary(const Problem& problem, const HostInputs& inputs, const std::vector<float>& upstream, int gpus,
                    const ShardOptions& options);
  ~ShardedVocabulary();
  ShardedVocabulary(const ShardedVocabulary&) = delete;
  ShardedVocabulary& operator=(const ShardedVocabulary&) = delete;

  void poison_outputs();
  void forward();           // loss and LSE on every GPU
  void forward_backward();  // and dE on every GPU, dC's shard on each
  HostOutputs download() const;  // GPU 0's loss, LSE, dE; dC gathered from the shards
  // Whether every GPU holds bitwise the same loss, LSE (and dE) as GPU 0.
  bool replicas_agree(bool backward) const;

  // Wall-clock times of whole steps (every GPU finished), after warm-up: the
  // median, and the mean and slowest, which show the steps of a dense run
  // that decide again (one in s10::kDecideEveryBatches).
  struct StepTimes {
    double median_ms = 0.0, mean_ms = 0.0, max_ms = 0.0;
    std::vector<double> each_ms;  // in order: the first timed step is the run's (warmup + 2)th
  };
  StepTimes time_forward_ms(int iters, int warmup = 2);
  StepTimes time_forward_backward_ms(int iters, int warmup = 2);
  // Of the last step, GPU 0's time inside NCCL calls (waits for the other
  // GPUs included), ms.
  double last_nccl_ms() const;

  int gpus() const { return static_cast<int>(ranks_.size()); }
  ShardRange shard(int p) const;
  // Per GPU: peak tracked bytes beyond its inputs (E, its C shard, targets).
  std::vector<size_t> peak_beyond_inputs() const;
  std::vector<size_t> input_bytes() const;
  void reset_peak_memory();
  // Per GPU: the memory model (outputs, stage 10's scratch, the combine's).
  std::vector<MemoryItem> memory_model(int p, bool backward) const;
  // Kept tiles of the last backward, summed over the shards.
  s10::DropStats drop_stats() const;
  // The last backward's eps and plan: chosen from the joined statistics, the
  // same on every GPU (GPU 0's; choices_agree compares them).
  s10::EpsChoice eps_choice() const;
  s10::PlanChoice plan_choice() const;
  bool choices_agree() const;
  // The last backward's statistics as joined (summed over the shards).
  s10::KeptPairs joined_kept_pairs() const;

 private:
  struct Rank;
  template <typename Step>
  void on_every_gpu(const Step& step) const;
  void step(bool backward);
  float* backward_to_accumulator(Rank& r) const;  // stage 10's steps, the statistics joined between them
  // Stage 10's decision on the shard's statistics, joined: the masses summed before the eps is chosen, the kept
  // pairs after (the same on every GPU); de_acc, dc: the tail correction's, or null.
  s10::KeptPairs joined_decision(Rank& r, const s10::DropSettings& settings, const DeviceInputs& in,
                                 const s10::DropPlan& plan, const Scratch& scratch, const float* lse,
                                 s10::BatchBackward& batch, float* de_acc, void* dc) const;
  s10::KeptPairs decide_on_sample(Rank& r) const;  // stage 10's sample decision, the shards joined
  std::vector<MemoryItem> sample_items(const Rank& r) const;  // and its scratch (Rank::sample_scratch)
  void dense_step(Rank& r, int64_t sample_rows) const;  // stage 10's dense plan before the forward, joined per chunk
  s10::DenseChunks dense_chunks(const Problem& local) const;        // dense_step's chunks of rows
  std::vector<MemoryItem> dense_step_items(const Problem& local) const;  // and its scratch
  Problem problem_;
  std::vector<float> upstream_;
  ShardOptions options_;
  s10::PlanHistory history_;  // as stage 10's: the last decision, and the dense steps since (the same on every GPU)
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace cce::s11
