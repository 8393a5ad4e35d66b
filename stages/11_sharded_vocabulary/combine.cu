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

std::vector<MemoryItem> combine_scratch(const Problem& p) {
  const size_t n = static_cast<size_t>(p.n);
  return {{"row max of every shard [N]", n * 4}, {"rescaled sums, target logits [2][N]", 2 * n * 4}, {kJoinItem, 16}};
}

void combine_row_states(const Problem& global, const int64_t* targets, const Scratch& scratch, ncclComm_t comm,
                        float* loss, float* lse, cudaStream_t stream) {
  const int64_t n = global.n;
  const float2* row_state = scratch.get<float2>("row (max, sum) [N]");
  float* row_max = scratch.get<float>("row max of every shard [N]");
  float* sums = scratch.get<float>("rescaled sums, target logits [2][N]");
  shard_max_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_state, n, row_max);
  CCE_CHECK_LAUNCH();
  check_nccl(ncclAllReduce(row_max, row_max, static_cast<size_t>(n), ncclFloat32, ncclMax, comm, stream),
             "ncclAllReduce (row max)");
  rescale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_state, row_max, scratch.get<float>("target logit [N]"),
                                                         n, sums);
  CCE_CHECK_LAUNCH();
  check_nccl(ncclAllReduce(sums, sums, static_cast<size_t>(2 * n), ncclFloat32, ncclSum, comm, stream),
             "ncclAllReduce (sums, target logits)");
  float* per_token = per_token_loss_buffer(global, loss, scratch);
  lse_and_loss_kernel<<<blocks_for(n), kThreads, 0, stream>>>(row_max, sums, targets, n, global.ignore_index, lse,
                                                              per_token);
  CCE_CHECK_LAUNCH();
  finish_loss(global, per_token, targets, loss, stream);
}

void reduce_de(const Problem& global, float* de_acc, void* de, ncclComm_t comm, cudaStream_t stream) {
  const int64_t count = global.n * global.d;
  check_nccl(ncclAllReduce(de_acc, de_acc, static_cast<size_t>(count), ncclFloat32, ncclSum, comm, stream),
             "ncclAllReduce (dE)");
  if (global.dtype == Dtype::kFloat32) return;  // fp32: the accumulator is dE itself
  round_de_kernel<__nv_bfloat16><<<blocks_for(count), kThreads, 0, stream>>>(de_acc, count,
                                                                             static_cast<__nv_bfloat16*>(de));
  CCE_CHECK_LAUNCH();
}

void join_dropped_mass(unsigned long long* mass, ncclComm_t comm, cudaStream_t stream) {
  check_nccl(ncclAllReduce(mass, mass, s10::kAutoExponents, ncclUint64, ncclSum, comm, stream),
             "ncclAllReduce (dropped mass per eps)");
}

s10::KeptPairs join_kept_pairs(const s10::KeptPairs& local, const Scratch& scratch, ncclComm_t comm,
                               cudaStream_t stream) {
  int64_t host[2] = {local.kept, local.pairs};
  int64_t* joined = scratch.get<int64_t>(kJoinItem);
  CCE_CUDA_CHECK(cudaMemcpyAsync(joined, host, sizeof host, cudaMemcpyHostToDevice, stream));
  check_nccl(ncclAllReduce(joined, joined, 2, ncclInt64, ncclSum, comm, stream), "ncclAllReduce (kept pairs)");
  CCE_CUDA_CHECK(cudaMemcpyAsync(host, joined, sizeof host, cudaMemcpyDeviceToHost, stream));
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return s10::KeptPairs{host[0], host[1]};
}

s10::DroppedMass join_dropped_mass(const std::vector<s10::DroppedMass>& shards) {
  s10::DroppedMass joined;
  if (shards.empty()) return joined;
  joined.rows = shards.front().rows;
  for (const s10::DroppedMass& shard : shards)
    for (int k = 0; k < s10::kAutoExponents; ++k) joined.mass[k] += shard.mass[k];
  return joined;
}

s10::KeptPairs join_kept_pairs(const std::vector<s10::KeptPairs>& shards) {
  s10::KeptPairs joined;
  for (const s10::KeptPairs& shard : shards) joined.kept += shard.kept, joined.pairs += shard.pairs;
  return joined;
}

}  // namespace cce::s11
