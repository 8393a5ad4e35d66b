// Stage 11's new kernels: what joins the shards. Each GPU has, per row i, its
// shard's (m_i^p, s_i^p) = (max logit, Σ exp(logit − max)) and its part of
// the target logit (0 unless t_i is in the shard). Two all-reduces give every
// GPU the same full row state:
//   M_i = max_p m_i^p,  S_i = Σ_p s_i^p·exp(m_i^p − M_i),  z_i = Σ_p z_i^p,
// and LSE_i = M_i + log S_i, loss_i = LSE_i − z_i. With one GPU, S_i = s_i and
// M_i = m_i exactly: the result is stage 10's, bit for bit.
#include "stages/11_sharded_vocabulary/sharded_vocabulary.h"

#include <cmath>

#include "common/check.h"
#include "common/device_math.cuh"
#include "common/token_reduction.h"

namespace cce::s11 {
namespace {

constexpr int kThreads = 256;
unsigned blocks_for(int64_t count) { return static_cast<unsigned>((count + kThreads - 1) / kThreads); }

__global__ void shard_max_kernel(const float2* __restrict__ row_state, int64_t n, float* __restrict__ row_max) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) row_max[i] = row_state[i].x;
}

// sums[i] = s_i^p·exp(m_i^p − M_i); sums[N + i] = this shard's part of the target logit.
__global__ void rescale_kernel(const float2* __restrict__ row_state, const float* __restrict__ row_max,
                               const float* __restrict__ target_logit, int64_t n, float* __restrict__ sums) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float2 state = row_state[i];
  sums[i] = state.x == -INFINITY ? 0.0f : state.y * __expf(state.x - row_max[i]);
  sums[n + i] = target_logit[i];
}

__global__ void lse_and_loss_kernel(const float* __restrict__ row_max, const float* __restrict__ sums,
                                    const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index,
                                    float* __restrict__ lse, float* __restrict__ loss_per_token) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float row_lse = row_max[i] + logf(sums[i]);
  lse[i] = row_lse;
  loss_per_token[i] = targets[i] == ignore_index ? 0.0f : row_lse - sums[n + i];
}

// A chunk of the dense plan: the shard's LSE from its fold as the row state
// (max LSE_i^p, sum 1) and its part of the target logit (the fold's where
// t_i is in the shard, else 0; a target outside the shard is rows() here).
__global__ void chunk_states_kernel(const float* __restrict__ shard_lse, const float* __restrict__ target_logit,
                                    const int64_t* __restrict__ shard_targets, int64_t n, int64_t shard_v,
                                    int64_t ignore_index, float2* __restrict__ row_state,
                                    float* __restrict__ target_part) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const int64_t t = shard_targets[i];
  row_state[i] = make_float2(shard_lse[i], 1.0f);
  target_part[i] = t != ignore_index && t >= 0 && t < shard_v ? target_logit[i] : 0.0f;
}

template <typename T>
__global__ void round_de_kernel(const float* __restrict__ de_acc, int64_t count, T* __restrict__ de) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x < count) de[x] = from_float<T>(de_acc[x]);
}

}  // namespace

void check_nccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess) throw CudaError(std::string("stage 11: ") + what + " failed: " + ncclGetErrorString(status));
}

std::vector<int64_t> shard_targets(const Problem& p, const std::vector<int64_t>& targets, ShardRange range) {
  std::vector<int64_t> local(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    const int64_t t = targets[i];
    local[i] = t == p.ignore_index ? t : t >= range.begin && t < range.end ? t - range.begin : range.rows();
  }
  return local;
}

std::vector<int64_t> targets_for_dot(const Problem& p, const std::vector<int64_t>& targets, ShardRange range) {
  std::vector<int64_t> local = shard_targets(p, targets, range);
  for (int64_t& t : local)
    if (t == range.rows()) t = p.ignore_index;
  return local;
}

std::vector<MemoryItem> combine_scratch(const Problem& p) {
  const size_t n = static_cast<size_t>(p.n);
  return {{kRowMaxItem, n * 4}, {kRescaledSumsItem, 2 * n * 4}, {kJoinItem, 16}};
}

std::vector<MemoryItem> dense_join_scratch(const Problem& p) {
  const size_t n = static_cast<size_t>(p.n);
  return {{kShardLseItem, n * 4}, {kShardStatesItem, n * 8}, {kShardTargetPartItem, n * 4}};
}

namespace {

// n rows' states of every shard joined: row_state[i] = (m_i^p, s_i^p) and
// target_part[i] this shard's part of the target logit, into the full LSE
// and per-token loss on every GPU (row_max [n] and sums [2n] the collectives' buffers).
void join_rows(int64_t n, const float2* row_state, const float* target_part, const int64_t* targets,
               int64_t ignore_index, float* row_max, float* sums, ncclComm_t comm, float* lse, float* per_token,
               cudaStream_t stream) {
  shard_max_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_state, n, row_max);
  CCE_CHECK_LAUNCH();
  check_nccl(ncclAllReduce(row_max, row_max, static_cast<size_t>(n), ncclFloat32, ncclMax, comm, stream),
             "ncclAllReduce (row max)");
  rescale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_state, row_max, target_part, n, sums);
  CCE_CHECK_LAUNCH();
  check_nccl(ncclAllReduce(sums, sums, static_cast<size_t>(2 * n), ncclFloat32, ncclSum, comm, stream),
             "ncclAllReduce (sums, target logits)");
  lse_and_loss_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_max, sums, targets, n, ignore_index, lse, per_token);
  CCE_CHECK_LAUNCH();
}

}  // namespace

void combine_row_states(const Problem& global, const int64_t* targets, const Scratch& scratch, ncclComm_t comm,
                        float* loss, float* lse, cudaStream_t stream) {
  float* per_token = per_token_loss_buffer(global, loss, scratch);
  join_rows(global.n, scratch.get<float2>("row (max, sum) [N]"), scratch.get<float>("target logit [N]"), targets,
            global.ignore_index, scratch.get<float>(kRowMaxItem),
            scratch.get<float>(kRescaledSumsItem), comm, lse, per_token, stream);
  finish_loss(global, per_token, targets, loss, stream);
}

void join_chunk_lse(const s10::DenseChunk& chunk, const Scratch& scratch, const int64_t* targets, ncclComm_t comm,
                    float* lse, float* per_token, cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  float2* states = scratch.get<float2>(kShardStatesItem);
  float* target_part = scratch.get<float>(kShardTargetPartItem);
  chunk_states_kernel<<<blocks_for(rows.n), kThreads, 0, stream>>>(scratch.get<float>(kShardLseItem),
                                                                   chunk.lse.target_logit, chunk.rows.targets.get(),
                                                                   rows.n, rows.v, rows.ignore_index, states,
                                                                   target_part);
  CCE_CHECK_LAUNCH();
  join_rows(rows.n, states, target_part, targets, rows.ignore_index, scratch.get<float>(kRowMaxItem),
            scratch.get<float>(kRescaledSumsItem), comm, lse, per_token, stream);
}

void sum_over_shards(float* values, int64_t count, ncclComm_t comm, cudaStream_t stream) {
  check_nccl(ncclAllReduce(values, values, static_cast<size_t>(count), ncclFloat32, ncclSum, comm, stream),
             "ncclAllReduce (sum over the shards)");
}

void sum_and_round_de(Dtype dtype, int64_t count, float* sums, void* de, ncclComm_t comm, cudaStream_t stream) {
  check_nccl(ncclAllReduce(sums, sums, static_cast<size_t>(count), ncclFloat32, ncclSum, comm, stream),
             "ncclAllReduce (dE)");
  if (dtype == Dtype::kFloat32) return;  // fp32: the sums are dE itself
  round_de_kernel<__nv_bfloat16><<<blocks_for(count), kThreads, 0, stream>>>(sums, count,
                                                                             static_cast<__nv_bfloat16*>(de));
  CCE_CHECK_LAUNCH();
}

void reduce_de(const Problem& global, float* de_acc, void* de, ncclComm_t comm, cudaStream_t stream) {
  sum_and_round_de(global.dtype, global.n * global.d, de_acc, de, comm, stream);
}

void join_misplaced_mass(unsigned long long* mass, ncclComm_t comm, cudaStream_t stream) {
  check_nccl(ncclAllReduce(mass, mass, s10::kAutoCandidates, ncclUint64, ncclSum, comm, stream),
             "ncclAllReduce (misplaced mass per eps)");
}

s10::KeptPairs join_kept_pairs(const s10::KeptPairs& local, const Scratch& scratch, int64_t* host, ncclComm_t comm,
                               cudaStream_t stream) {
  host[0] = local.kept, host[1] = local.pairs;
  int64_t* joined = scratch.get<int64_t>(kJoinItem);
  CCE_CUDA_CHECK(cudaMemcpyAsync(joined, host, 2 * sizeof(int64_t), cudaMemcpyHostToDevice, stream));
  check_nccl(ncclAllReduce(joined, joined, 2, ncclInt64, ncclSum, comm, stream), "ncclAllReduce (kept pairs)");
  CCE_CUDA_CHECK(cudaMemcpyAsync(host, joined, 2 * sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return s10::KeptPairs{host[0], host[1]};
}

s10::MisplacedMass join_misplaced_mass(const std::vector<s10::MisplacedMass>& shards) {
  s10::MisplacedMass joined;
  if (shards.empty()) return joined;
  joined.rows = shards.front().rows;
  for (const s10::MisplacedMass& shard : shards)
    for (int k = 0; k < s10::kAutoCandidates; ++k) joined.mass[k] += shard.mass[k];
  return joined;
}

s10::KeptPairs join_kept_pairs(const std::vector<s10::KeptPairs>& shards) {
  s10::KeptPairs joined;
  for (const s10::KeptPairs& shard : shards) joined.kept += shard.kept, joined.pairs += shard.pairs;
  return joined;
}

}  // namespace cce::s11
