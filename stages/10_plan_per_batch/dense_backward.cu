// The dense plan: when most tiles would be kept, recomputing them one by one
// costs more than recomputing everything with cuBLAS. Two ways, by whether
// the forward has run.
//
// After the forward (dense_backward), the LSE is known: the vocabulary is cut
// into slabs of columns; per slab, three GEMMs and one pass over the slab:
//   Z = E·C_slabᵀ (fp32), S = g·(p − onehot)·softcap' in place (bf16, packed
//   into the first half of each fp32 row), dE += S·C_slab (fp32 accumulator),
//   dC_slab = Sᵀ·E.
// Four GEMMs with the forward's.
//
// Before the forward (dense_loss_and_gradient), planned from the previous
// batch: the rows are cut into chunks, and a chunk's logits are the whole
// rows, so its LSE comes with them: stage 03's forward, whose epilogue here
// also keeps each tile after the fold has softcapped it (FoldThenKeepTile).
// For bf16 inputs it keeps q_ij = exp(z_ij − R_i)·softcap'(z_ij) in bf16, R_i
// the row's target logit, found before the forward: then S_ij = α_i·q_ij with
// a scale α_i per row that the LSE gives, and the products read q as it is:
// dE's rows = α ∘ (Q·C) and dC += Qᵀ·(α ∘ E_rows), the target's entry of Q
// set to 0 and its term S_it added apart. Three GEMMs and no pass over the
// chunk between them (and one small GEMM for the targets' rows of dC).
// fp32 inputs keep
// the logits in fp32 and make S in place. dC sums over the chunks (fp32 for
// bf16), which the slabs avoid, and one chunk of every row avoids too.
//
// Every sum runs in a fixed order (cuBLAS's, stage 03's): deterministic, and
// exact up to the arithmetic of stage 01's backward (S rounded once), except
// that dC's product takes α_i·E_i rounded to bf16, which the stage declares
// (GradientApproximation::scaled_rows_rounding). A bf16 dE or dC is
// rounded once from fp32: cuBLAS writes the products in fp32 and the plan
// rounds them, except one chunk's dC, which cuBLASLt writes in bf16 from fp32
// sums.
#include <cub/device/device_scan.cuh>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_math.cuh"
#include "common/mapped_value.h"
#include "common/radix_sort.cuh"
#include "common/sort_pairs.h"
#include "common/tile/launch.cuh"
#include "common/token_reduction.h"
#include "stages/03_fused_gemm_ce/split_lse.cuh"
#include "stages/04_indexed_dot/indexed_dot.h"
#include "stages/06_fused_backward/fused_backward.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce::s10 {
namespace {

constexpr int kSlabThreads = 256;
constexpr int64_t kSlabColumnMultiple = 256;
constexpr int64_t kSlabPitchMultiple = 64;  // floats: 256-byte aligned rows for cuBLAS and float4 loads

// S_ij (softmax_gradient, common/device_math.cuh) of a kept logit: the slabs
// keep cuBLAS's (before the softcap), the chunks the fold's (after it).
// kSoftcap is settled per launch and the target per group of columns, so that
// an element costs an exponential, a compare and a multiply (and with the
// softcap, three more).
template <bool kSoftcap>
__device__ __forceinline__ float slab_gradient(float logit, bool capped, bool is_target, float row_lse, float g,
                                               float softcap, float inv_softcap) {
  const float z = kSoftcap && !capped ? apply_softcap(logit, softcap) : logit;
  return softmax_gradient<kSoftcap>(z - row_lse, z, is_target, g, inv_softcap);
}

// Which of the `count` columns from j holds the target (−1: none), as a small int.
__device__ __forceinline__ int target_among(int64_t target, int64_t j, int count) {
  return target >= j && target < j + count ? static_cast<int>(target - j) : -1;
}

// One block per row of the slab. kPackBf16: S_ij lands at bf16 index j of the
// row's own storage; each chunk of 4·blockDim floats is read by every thread
// before the barrier and written after it, and its bf16 values only cover
// bytes this or an earlier chunk has read (stage 01's packing, four at once).
template <bool kPackBf16, bool kSoftcap>
__global__ void slab_gradient_kernel(float* __restrict__ slab, int64_t pitch, int64_t columns, int64_t first_column,
                                     const int64_t* __restrict__ targets, const float* __restrict__ lse,
                                     const float* __restrict__ grad_scale, float softcap, bool capped) {
  const int64_t row = blockIdx.x;
  const float g = grad_scale[row], row_lse = lse[row], inv_softcap = kSoftcap ? 1.0f / softcap : 0.0f;
  const int64_t target = targets[row] - first_column;  // outside [0, columns) when not in this slab
  float* z_row = slab + row * pitch;
  __nv_bfloat16* out_row = reinterpret_cast<__nv_bfloat16*>(z_row);
  for (int64_t chunk = 0; chunk < columns; chunk += 4 * blockDim.x) {
    const int64_t j = chunk + 4 * threadIdx.x;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int t = target_among(target, j, 4);
    if (j + 3 < columns) {
      const float4 z = *reinterpret_cast<const float4*>(z_row + j);
      s[0] = slab_gradient<kSoftcap>(z.x, capped, t == 0, row_lse, g, softcap, inv_softcap);
      s[1] = slab_gradient<kSoftcap>(z.y, capped, t == 1, row_lse, g, softcap, inv_softcap);
      s[2] = slab_gradient<kSoftcap>(z.z, capped, t == 2, row_lse, g, softcap, inv_softcap);
      s[3] = slab_gradient<kSoftcap>(z.w, capped, t == 3, row_lse, g, softcap, inv_softcap);
    } else {
      for (int k = 0; k < 4 && j + k < columns; ++k)
        s[k] = slab_gradient<kSoftcap>(z_row[j + k], capped, t == k, row_lse, g, softcap, inv_softcap);
    }
    if constexpr (kPackBf16) {
      __syncthreads();
      if (j + 3 < columns) {
        const __nv_bfloat162 lo = __floats2bfloat162_rn(s[0], s[1]), hi = __floats2bfloat162_rn(s[2], s[3]);
        uint2 packed;
        packed.x = *reinterpret_cast<const unsigned*>(&lo);
        packed.y = *reinterpret_cast<const unsigned*>(&hi);
        *reinterpret_cast<uint2*>(out_row + j) = packed;  // 8-byte aligned: pitch and j are multiples of 4
      } else {
        for (int k = 0; k < 4 && j + k < columns; ++k) out_row[j + k] = __float2bfloat16(s[k]);
      }
    } else {
      for (int k = 0; k < 4 && j + k < columns; ++k) z_row[j + k] = s[k];
    }
  }
}

// The chunks of bf16 inputs keep, for each logit, q_ij = exp(z_ij − R_i)·softcap'(z_ij)
// in bf16, where R_i is fixed before the forward: the row's target logit
// (stage 04's indexed dot, softcapped as the fold does; +inf for an ignored
// row, whose q is then 0 and whose g is 0 anyway). Once the fold has the
// LSE, S_ij = α_i·q_ij with α_i = g_i·exp(R_i − LSE_i), so
//   dE_i = α_i·(Q·C)_i + S_it·C_{t_i},   dC = Qᵀ·(α ∘ E) + Σ_{t_i = t} S_it·E_i,
// with the target's entry of Q at 0 and S_it = g_i·(p_it − 1)·softcap'(z_it)
// made in fp32 from the fold's z_it (q_it, 1 when R_i is z_it, would lose
// p_it − 1 in bf16 where p_it is near 1; S_it/α_i in Q's entry, about −V on a
// flat row, would round the term that dominates that row). dE adds it to its
// fp32 row. dC's rows of the batch's target tokens get their target terms
// after the product: added to a row already rounded, a frequent token's would
// cancel its rounded p part (on a peaked softmax dC's error twice eager's), so
// such a row is summed whole before its one rounding (target_rows_kernel);
// one chunk does so only where the p part is over a quarter of the row
// (write_target_rows_of_one_chunk). No pass rewrites the chunk:
// the products read q as the forward left it, but for one entry per row.
// R_i ≤ LSE_i, and LSE_i − R_i is the row's
// loss; beyond kMostReferenceGap nats the largest q would near fp32's range
// (and α_i·E_i bf16's smallest normal), so the chunk runs again with R_i =
// LSE_i, which the first run found (q_ij = p_ij·softcap'_ij ≤ 1 then).
constexpr float kMostReferenceGap = 40.0f;

// R_i from the raw target logit, in place.
__global__ void reference_from_dot_kernel(float* __restrict__ reference, const int64_t* __restrict__ targets,
                                          int64_t n, int64_t ignore_index, float softcap) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= n) return;
  reference[row] = targets[row] == ignore_index ? INFINITY : apply_softcap(reference[row], softcap);
}

// Whether a valid row's LSE lies more than kMostReferenceGap above its R_i.
__global__ void reference_gap_kernel(const float* __restrict__ lse, const float* __restrict__ reference,
                                     const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index,
                                     int* __restrict__ too_far) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row < n && targets[row] != ignore_index && lse[row] - reference[row] > kMostReferenceGap) *too_far = 1;
}

// One block per chunk row, after the fold: α_i; S_it in fp32 (the target's
// term, added apart) and 0 in the target's entry of Q; the row of E times α_i
// in bf16 for dC's product.
__global__ void row_scales_kernel(const float* __restrict__ lse, const float* __restrict__ reference,
                                  const float* __restrict__ target_logit, const int64_t* __restrict__ targets,
                                  int64_t ignore_index, int64_t v, const float* __restrict__ grad_scale, float softcap,
                                  __nv_bfloat16* __restrict__ q, int64_t pitch, const __nv_bfloat16* __restrict__ e,
                                  int64_t d, __nv_bfloat16* __restrict__ e_scaled, float* __restrict__ alpha,
                                  float* __restrict__ target_term) {
  const int64_t row = blockIdx.x;
  const int64_t target = targets[row];
  const bool valid = target != ignore_index;
  const float row_lse = lse[row], g = grad_scale[row];
  const float a = valid ? g * expf(reference[row] - row_lse) : 0.0f;
  if (threadIdx.x == 0) {
    alpha[row] = a;
    float s_target = 0.0f;
    if (valid && target >= 0 && target < v) {  // else the target's term is on another shard (stage 11)
      const float zt = target_logit[row];
      s_target = g * expm1f(zt - row_lse) * softcap_derivative(zt, softcap);  // g·(p_it − 1)·softcap'
      q[row * pitch + target] = __float2bfloat16(0.0f);
    }
    target_term[row] = s_target;
  }
  const __nv_bfloat16* e_row = e + row * d;
  __nv_bfloat16* out = e_scaled + row * d;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) out[k] = __float2bfloat16(a * __bfloat162float(e_row[k]));
}

// dE's row: α_i·(Q·C)_i + S_it·C_{t_i} from fp32, rounded once to bf16, or
// (Out float) left in fp32 in place of the product for stage 11 to sum over
// its shards first. One block per row.
template <typename Out>
__global__ void finish_de_rows_kernel(const float* product, const float* __restrict__ alpha,
                                      const float* __restrict__ target_term, const int64_t* __restrict__ targets,
                                      int64_t ignore_index, int64_t v, const __nv_bfloat16* __restrict__ c, int64_t d,
                                      Out* de) {
  const int64_t row = blockIdx.x;
  const float a = alpha[row], s = target_term[row];
  const int64_t target = targets[row];
  const bool here = target != ignore_index && target >= 0 && target < v;  // else its term is on another shard
  const __nv_bfloat16* c_row = here ? c + target * d : nullptr;
  for (int64_t k = threadIdx.x; k < d; k += blockDim.x) {
    float x = a * product[row * d + k];
    if (c_row != nullptr) x += s * __bfloat162float(c_row[k]);
    de[row * d + k] = from_float<Out>(x);
  }
}

// dC's rows of the batch's target tokens, summed whole before their one
// rounding. The rows are sorted by target (t_i, or V when ignored; stable: in
// row order within a token); run_of[k] numbers the runs of sorted position k
// from 1. Each chunk gathers Q's columns of the targets (their entries in the
// targets' own rows are 0) for one fp32 product with α ∘ E (one chunk), or dC's
// fp32 accumulator has those sums (several chunks); then each run adds its
// S_it·E_i and writes its token's row of dC. A frequent token's two parts, p's
// over every row and the target's, meet in fp32; on a flat softmax the
// target's, which dominates, is exact up to that one rounding.
__global__ void target_key_kernel(const int64_t* __restrict__ targets, int64_t n, int64_t ignore_index, int64_t v,
                                  int* __restrict__ key, int* __restrict__ row_index) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= n) return;
  const int64_t t = targets[row];
  key[row] = t == ignore_index || t < 0 || t >= v ? static_cast<int>(v) : static_cast<int>(t);  // v: no row of dC here
  row_index[row] = static_cast<int>(row);
}
__global__ void run_head_kernel(const int* __restrict__ sorted_key, int64_t n, int64_t v, int* __restrict__ head) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k < n) head[k] = sorted_key[k] < v && (k == 0 || sorted_key[k - 1] != sorted_key[k]) ? 1 : 0;
}
// The runs' tokens, in run order, and their count (a mapped int read by the host).
__global__ void run_tokens_kernel(const int* __restrict__ sorted_key, const int* __restrict__ run_of, int64_t n,
                                  int64_t v, int* __restrict__ run_token, int* __restrict__ runs) {
  const int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n || sorted_key[k] >= v) return;
  if (k == 0 || sorted_key[k - 1] != sorted_key[k]) run_token[run_of[k] - 1] = sorted_key[k];
  if (k == n - 1 || sorted_key[k + 1] >= v) *runs = run_of[k];  // the last valid position
}
// Q's columns of the given tokens for one chunk: out [rows, tokens], one block per row.
__global__ void gather_target_columns_kernel(const __nv_bfloat16* __restrict__ q, int64_t pitch,
                                             const int* __restrict__ tokens, int64_t count,
                                             __nv_bfloat16* __restrict__ out) {
  const int64_t row = blockIdx.x;
  for (int64_t u = threadIdx.x; u < count; u += blockDim.x) out[row * count + u] = q[row * pitch + tokens[u]];
}
// A run's target terms over one block of kTargetBlockCols columns: the run
// starts at sorted position `first` (key `key`) and ends at the first later
// position with another key (found 256 positions a step); its warps take the
// rows in turn and their sums are added in warp order (deterministic). Returns
// this thread's column's Σ S_it·E_i (column blockIdx.y·kTargetBlockCols +
// threadIdx.x; 0 past D). Called by every thread of the block.
constexpr int kTargetLaneCols = 8, kTargetBlockCols = 32 * kTargetLaneCols;
__device__ float run_target_terms(const int* __restrict__ sorted_key, const int* __restrict__ sorted_row,
                                  int64_t first, int key, int64_t n, const float* __restrict__ target_term,
                                  const __nv_bfloat16* __restrict__ e, int64_t d) {
  constexpr int kWarps = kSlabThreads / 32;
  __shared__ float warp_sums[kWarps][kTargetBlockCols];
  __shared__ int run_end;
  if (threadIdx.x == 0) run_end = static_cast<int>(n);  // N < 2^31 (Problem::validate)
  __syncthreads();
  for (int64_t base = first + 1; base < n; base += blockDim.x) {
    const int64_t at = base + threadIdx.x;
    const bool other = at < n && sorted_key[at] != key;
    if (other) atomicMin(&run_end, static_cast<int>(at));
    if (__syncthreads_or(other)) break;
  }
  const int64_t end = run_end;
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  const int64_t col = blockIdx.y * kTargetBlockCols + lane * kTargetLaneCols;  // this lane's first column
  float sum[kTargetLaneCols] = {};
  if (col < d) {
    for (int64_t at = first + warp; at < end; at += kWarps) {
      const int row = sorted_row[at];
      const float term = target_term[row];
      const __nv_bfloat16* e_row = e + static_cast<int64_t>(row) * d + col;
#pragma unroll
      for (int j = 0; j < kTargetLaneCols; ++j)
        if (col + j < d) sum[j] += term * __bfloat162float(e_row[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kTargetLaneCols; ++j) warp_sums[warp][lane * kTargetLaneCols + j] = sum[j];
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += warp_sums[w][threadIdx.x];
  return total;
}
__device__ bool starts_a_run(const int* __restrict__ sorted_key, int64_t first, int64_t v) {
  const int key = sorted_key[first];
  return key < v && (first == 0 || sorted_key[first - 1] != key);
}
// One block per sorted position and kTargetBlockCols columns; a run's first
// position writes its token's row, rounded once: the run's target terms plus
// the row of `sums` that sums_row_of_run names for the run (null: the token's
// row); a run named −1 has its row written already (rounded_target_rows_kernel).
__global__ void __launch_bounds__(kSlabThreads)
    target_rows_kernel(const int* __restrict__ sorted_key, const int* __restrict__ sorted_row,
                       const int* __restrict__ run_of, int64_t n, int64_t v, const float* __restrict__ target_term,
                       const __nv_bfloat16* __restrict__ e, int64_t d, const float* __restrict__ sums,
                       const int* __restrict__ sums_row_of_run, __nv_bfloat16* __restrict__ dc) {
  const int64_t first = blockIdx.x;
  if (!starts_a_run(sorted_key, first, v)) return;
  const int key = sorted_key[first];
  const int64_t sums_row = sums_row_of_run == nullptr ? key : sums_row_of_run[run_of[first] - 1];
  if (sums_row < 0) return;
  const float terms = run_target_terms(sorted_key, sorted_row, first, key, n, target_term, e, d);
  const int64_t k = blockIdx.y * kTargetBlockCols + threadIdx.x;
  if (k < d) dc[static_cast<int64_t>(key) * d + k] = __float2bfloat16(sums[sums_row * d + k] + terms);
}
// One chunk: each run's target terms added to its token's row as the product
// wrote it (bf16, rounded once), and the row rounded again, the same grid as
// target_rows_kernel. Per run and block of columns, the squared norms of the
// product's part P and of the row P + T (fp32, reduced in a fixed order) go to
// norms[run][blockIdx.y][2], for whole_runs_kernel.
__global__ void __launch_bounds__(kSlabThreads)
    rounded_target_rows_kernel(const int* __restrict__ sorted_key, const int* __restrict__ sorted_row,
                               const int* __restrict__ run_of, int64_t n, int64_t v,
                               const float* __restrict__ target_term, const __nv_bfloat16* __restrict__ e, int64_t d,
                               __nv_bfloat16* __restrict__ dc, float* __restrict__ norms) {
  __shared__ float scratch[32];
  const int64_t first = blockIdx.x;
  if (!starts_a_run(sorted_key, first, v)) return;
  const int key = sorted_key[first];
  const float terms = run_target_terms(sorted_key, sorted_row, first, key, n, target_term, e, d);
  const int64_t k = blockIdx.y * kTargetBlockCols + threadIdx.x;
  float part = 0.0f, row = 0.0f;
  if (k < d) {
    __nv_bfloat16* out = dc + static_cast<int64_t>(key) * d + k;
    part = __bfloat162float(*out);
    row = part + terms;
    *out = __float2bfloat16(row);
  }
  const float part_sq = block_reduce_sum(part * part, scratch);
  const float row_sq = block_reduce_sum(row * row, scratch);
  if (threadIdx.x == 0) {
    float* out = norms + (static_cast<int64_t>(run_of[first] - 1) * gridDim.y + blockIdx.y) * 2;
    out[0] = part_sq, out[1] = row_sq;
  }
}
// A row whose product part is at most this share of it keeps the rounded
// part: rounding P added at most u_b·‖P‖ ≤ u_b·‖row‖/4 to a row that its own
// rounding moves by up to u_b·‖row‖. A larger part may cancel against the
// target terms (a frequent token), so its row is summed whole in fp32.
constexpr float kRoundedPartShare = 0.25f;
// One thread per run: whether its row is summed whole (1) or keeps the rounded part (0).
__global__ void whole_runs_kernel(const float* __restrict__ norms, int64_t runs, int groups, int* __restrict__ whole) {
  const int64_t run = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (run >= runs) return;
  float part = 0.0f, row = 0.0f;
  for (int g = 0; g < groups; ++g) part += norms[(run * groups + g) * 2], row += norms[(run * groups + g) * 2 + 1];
  whole[run] = part > kRoundedPartShare * kRoundedPartShare * row ? 1 : 0;
}
// The runs summed whole, in run order (position: the inclusive scan of
// `whole`): their tokens, each run's row among them (−1: rounded), their count
// (a mapped int read by the host).
__global__ void whole_run_list_kernel(const int* __restrict__ whole, const int* __restrict__ position,
                                      const int* __restrict__ run_token, int64_t runs, int* __restrict__ whole_token,
                                      int* __restrict__ row_of_run, int* __restrict__ count) {
  const int64_t run = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (run >= runs) return;
  row_of_run[run] = whole[run] != 0 ? position[run] - 1 : -1;
  if (whole[run] != 0) whole_token[position[run] - 1] = run_token[run];
  if (run == runs - 1) *count = position[run];
}

// Stage 03's forward epilogue, then the tile kept: after the fold has
// softcapped the tile in place, each logit goes to the chunk's buffer (row
// pitch `pitch`): fp32 as it is, or q in bf16 against its row's R_i.
// So one pass of the engine leaves both the logits and the LSE, where cuBLAS
// would leave the logits and a row pass read them again.
struct KeepTileParams {
  s03::SplitLseParams lse;
  void* logits;               // [chunk rows, pitch], bf16 q or fp32 z
  const float* reference;     // bf16: R_i [chunk rows], else null
  int64_t pitch;              // a multiple of 64 logits
};

template <class Frag>
struct FoldThenKeepTile {
  using Params = KeepTileParams;
  static constexpr size_t kSharedBytes = s03::SplitLseEpilogue<Frag>::kSharedBytes;
  s03::SplitLseEpilogue<Frag> fold;
  Params keep;

  __device__ FoldThenKeepTile(const Params& params, unsigned char* shared) : fold(params.lse, shared), keep(params) {}
  __device__ void begin(const Unit& unit) { fold.begin(unit); }
  __device__ void tile(Frag& frag, const Unit& unit, int64_t col0) {
    const int64_t row0 = unit.token_block * Frag::kBM;
    if (keep.reference == nullptr) {
      fold.tile(frag, unit, col0);
      keep_fp32(frag, row0, col0);
      return;
    }
    const bool whole = col0 + Frag::kBN <= fold.p.v;  // every tile but V's last
    static_bool(fold.p.softcap > 0.0f, [&](auto softcapped) {
      fold_into_q<decltype(softcapped)::value>(frag, row0, col0);
    });
    static_bool(whole, [&](auto is_whole) { keep_q<decltype(is_whole)::value>(frag, row0, col0); });
  }
  __device__ void end(const Unit& unit) { fold.end(unit); }

  __device__ void keep_fp32(Frag& frag, int64_t row0, int64_t col0) {
    const int64_t n = fold.p.n, v = fold.p.v;
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r) {
      const int64_t row = row0 + Frag::row_of(r);
      if (row >= n) continue;
      float* out = static_cast<float*>(keep.logits) + row * keep.pitch + col0;
      if constexpr (Frag::kColumnsShareLaneMod4) {  // the m16n8 picture: z(r, c), z(r, c + 1) side by side
#pragma unroll
        for (int c = 0; c < Frag::kCols; c += 2) {
          const int col = Frag::col_of(c);
          if (col0 + col + 1 < v)
            *reinterpret_cast<float2*>(out + col) = make_float2(frag.z(r, c), frag.z(r, c + 1));
          else if (col0 + col < v)
            out[col] = frag.z(r, c);
        }
      } else {
#pragma unroll
        for (int c = 0; c < Frag::kCols; ++c)
          if (col0 + Frag::col_of(c) < v) out[Frag::col_of(c)] = frag.z(r, c);
      }
    }
  }

  // Stage 03's fold (fold_tile_into_rows, the same instructions, so the same
  // LSE), with the tile rewritten as q = exp(z − R_i)·softcap'(z) in fp32. The
  // fold adds e = 2^((z − m)·log2e) for the row's running max m, so
  // q = e·2^((m − R_i)·log2e): one exp per row and tile, not one per logit.
  template <bool kSoftcap>
  __device__ void fold_into_q(Frag& frag, int64_t row0, int64_t col0) {
    const s03::SplitLseParams& p = fold.p;
    softcap_and_mask_tile(frag, col0, p.v, p.softcap);
    const float inv_softcap = kSoftcap ? 1.0f / p.softcap : 0.0f;
#pragma unroll
    for (int r = 0; r < Frag::kRows; ++r) {
      const int tile_row = Frag::row_of(r);
      if (p.target_logit != nullptr) record_target_logit(frag, fold.states, r, row0, col0, p.target_logit);
      float m[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c) m[c % 4] = fmaxf(m[c % 4], frag.z(r, c));
      const float tile_max = fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
      if (tile_max == -INFINITY) continue;  // all columns past V: nothing is stored
      OnlineSoftmax& state = fold.states.slot(tile_row);
      const float new_max = fmaxf(state.max, tile_max);
      const int64_t row = row0 + tile_row;
      const float to_q = fast_exp2((new_max - keep.reference[row < p.n ? row : 0]) * kLog2e);
      float s[4] = {state.sum * fast_exp2((state.max - new_max) * kLog2e), 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int c = 0; c < Frag::kCols; ++c) {
        const float z = frag.z(r, c);
        const float e = fast_exp2((z - new_max) * kLog2e);
        s[c % 4] += e;
        float q = e * to_q;
        if constexpr (kSoftcap) {
          const float x = z * inv_softcap;
          q *= 1.0f - x * x;
        }
        frag.z(r, c) = q;
      }
      state.max = new_max;
      state.sum = (s[0] + s[1]) + (s[2] + s[3]);
    }
  }

  // The tile's q (fold_into_q) in bf16. The bf16 tiles' m16n8 picture: the
  // 4 lanes of a quad hold a row's columns in blocks of 8, two each. Stored
  // as they are held, a quad's pairs of one block cover 16 bytes, half a
  // 32-byte sector; so each two blocks (16 columns) are exchanged first:
  // lanes 2k and 2k + 1 swap a word (the even lane gives its pair of the
  // second block, the odd one its pair of the first), after which each lane
  // holds 4 consecutive columns and the quad writes the 32 bytes in one store.
  // Each row's pointer is made once, and a tile wholly inside V (kWhole)
  // stores without column checks: the epilogue runs while the tensor cores
  // wait, so its instructions count.
  template <bool kWhole>
  __device__ void keep_q(Frag& frag, int64_t row0, int64_t col0) {
    if constexpr (Frag::kColumnsShareLaneMod4) {
      static_assert(Frag::kCols % 8 == 0, "whole blocks of 16 columns per pair of lanes");
      const int64_t n = fold.p.n, v = fold.p.v;
      const int lane = static_cast<int>(threadIdx.x % 4);
      const bool odd = (lane & 1) != 0;
      // This lane's 4 columns in a window of 16, after the exchange below.
      const int lane_col = odd ? 8 + 2 * (lane - 1) : 2 * lane;
#pragma unroll
      for (int r = 0; r < Frag::kRows; ++r) {
        const int64_t row = row0 + Frag::row_of(r);
        const bool kept = row < n;  // the quad's four lanes agree; every lane still shuffles
        const int64_t safe_row = kept ? row : 0;
        __nv_bfloat16* out = static_cast<__nv_bfloat16*>(keep.logits) + safe_row * keep.pitch + col0 + lane_col;
#pragma unroll
        for (int block = 0; block < Frag::kCols / 8; ++block) {
          const int group = Frag::col_of(8 * block) - 2 * lane;  // the 32 columns' first
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // the group's two windows of 16 columns: blocks 2h and 2h + 1
            const int ca = 8 * block + 4 * h, cb = ca + 2;  // this lane's pair in each block
            const unsigned a = bf162_bits(frag.z(r, ca), frag.z(r, ca + 1));
            const unsigned b = bf162_bits(frag.z(r, cb), frag.z(r, cb + 1));
            const unsigned got = __shfl_xor_sync(0xffffffffu, odd ? a : b, 1);
            // Even lane l: its pair and lane l + 1's of the first block, at 2l;
            // odd lane l: lane l − 1's pair and its own of the second block, at 8 + 2(l − 1).
            const uint2 word = odd ? make_uint2(got, b) : make_uint2(a, got);
            __nv_bfloat16* at = out + group + 16 * h;
            const int64_t first_col = col0 + group + 16 * h + lane_col;
            if (kWhole || first_col + 3 < v) {
              if (kept) *reinterpret_cast<uint2*>(at) = word;  // 8-byte aligned: a multiple of 4 columns
            } else if (kept) {
              const unsigned halves[2] = {word.x, word.y};
#pragma unroll
              for (int k = 0; k < 4; ++k)
                if (first_col + k < v)
                  at[k] = __ushort_as_bfloat16(static_cast<unsigned short>(halves[k / 2] >> (16 * (k % 2))));
            }
          }
        }
      }
    }
  }
  __device__ static unsigned bf162_bits(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const unsigned*>(&h);
  }
};

// bf16 gradients come from fp32 products rounded once by the plan itself
// (plan_per_batch.h says why, at dense_slab_items): dC's sum over the chunks
// in fp32, dE's rows too.
bool accumulates_dc_in_fp32(const Problem& p, bool with_dc) { return with_dc && p.dtype == Dtype::kBFloat16; }

int to_int(int64_t x) { return static_cast<int>(x); }  // Problem::validate keeps N, D, V below 2^31

// out [m, n] = a [m, k] · bᵀ (b stored [n, k]), column-major, bf16 in and out,
// each output rounded once from its fp32 sum: cuBLASLt may split the sum over
// k only with fp32 partial sums in the workspace (reduction scheme "compute
// type"), never adding partial sums in bf16 (schemes "in place" and "output
// type", which cuBLAS's own choice may take). Checked on the algorithm found.
void product_to_bf16_rounded_once(int m, int n, int k, const void* a, int lda, const void* b, int ldb, void* out,
                                  int ldo, void* workspace, cudaStream_t stream) {
  struct Descriptors {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, out = nullptr;
    cublasLtMatmulPreference_t preference = nullptr;
    ~Descriptors() {
      if (preference) cublasLtMatmulPreferenceDestroy(preference);
      if (out) cublasLtMatrixLayoutDestroy(out);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (op) cublasLtMatmulDescDestroy(op);
    }
  } desc;
  const cublasOperation_t no = CUBLAS_OP_N, transposed = CUBLAS_OP_T;
  CCE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CCE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof(no)));
  CCE_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &transposed, sizeof(transposed)));
  CCE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.a, CUDA_R_16BF, m, k, lda));
  CCE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.b, CUDA_R_16BF, n, k, ldb));
  CCE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&desc.out, CUDA_R_16BF, m, n, ldo));
  CCE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&desc.preference));
  const uint64_t workspace_bytes = kCublasWorkspaceBytes;
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
  CCE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(desc.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                        &workspace_bytes, sizeof(workspace_bytes)));
  CCE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(desc.preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                        &schemes, sizeof(schemes)));
  cublasLtHandle_t lt = cublaslt_handle();
  cublasLtMatmulHeuristicResult_t found{};
  int count = 0;
  CCE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt, desc.op, desc.a, desc.b, desc.out, desc.out, desc.preference, 1,
                                                  &found, &count));
  if (count == 0) throw CudaError("cuBLASLt has no bf16 product with fp32 partial sums for dC");
  uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
  uint32_t splits = 1;
  size_t written = 0;
  CCE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&found.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                        sizeof(splits), &written));
  CCE_CUBLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&found.algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                        sizeof(scheme), &written));
  if (splits > 1 && scheme != CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)
    throw CudaError("cuBLASLt chose a bf16 dC product that adds partial sums in bf16");
  const float one = 1.0f, zero = 0.0f;
  CCE_CUBLAS_CHECK(cublasLtMatmul(lt, desc.op, &one, a, desc.a, b, desc.b, &zero, out, desc.out, out, desc.out,
                                  &found.algo, workspace, workspace_bytes, stream));
}

}  // namespace

int64_t slab_columns_within(const Problem& p, size_t logit_bytes) {
  const int64_t fit = static_cast<int64_t>(logit_bytes / (4 * static_cast<size_t>(std::max<int64_t>(p.n, 1))));
  return std::max(kSlabColumnMultiple, fit / kSlabColumnMultiple * kSlabColumnMultiple);
}

DenseSlabs plan_dense_slabs(const Problem& p, int64_t columns) {
  if (columns <= 0) columns = slab_columns_within(p, kDefaultDenseSlabBytes);
  DenseSlabs slabs;
  slabs.columns = std::min(p.v, columns);
  slabs.pitch = (slabs.columns + kSlabPitchMultiple - 1) / kSlabPitchMultiple * kSlabPitchMultiple;
  slabs.count = (p.v + slabs.columns - 1) / slabs.columns;
  return slabs;
}

std::vector<MemoryItem> dense_slab_items(const Problem& p, const DenseSlabs& slabs, bool with_dc) {
  std::vector<MemoryItem> items = {{kDenseSlabItem, static_cast<size_t>(p.n * slabs.pitch) * 4}};
  if (accumulates_dc_in_fp32(p, with_dc)) items.push_back({kDenseDcSlabItem, static_cast<size_t>(slabs.columns * p.d) * 4});
  return items;
}

void slab_gradient_products(const Problem& p, const SlabColumns& columns, const float* lse, const float* grad_scale,
                            float* slab, int64_t pitch, cudaStream_t stream) {
  const bool bf16 = p.dtype == Dtype::kBFloat16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const int n = to_int(p.n), d = to_int(p.d), count = to_int(columns.count);
  // S's pitch in its own elements: bf16 values packed into fp32 rows are twice as many per row.
  const int s_pitch = to_int(bf16 ? 2 * pitch : pitch);
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t handle = cublas_handle_on(stream);
  // Row-major Z [N, columns] (rows of `pitch`) is column-major [columns, N] = C_slab·Eᵀ.
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, count, n, d, &one, columns.c, type, d, columns.e,
                                type, d, &zero, slab, CUDA_R_32F, to_int(pitch), CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
  static_bool(p.softcap > 0.0f, [&](auto softcapped) {
    constexpr bool kSoftcap = decltype(softcapped)::value;
    if (bf16)
      slab_gradient_kernel<true, kSoftcap><<<static_cast<unsigned>(p.n), kSlabThreads, 0, stream>>>(
          slab, pitch, columns.count, columns.first, columns.targets, lse, grad_scale, p.softcap, false);
    else
      slab_gradient_kernel<false, kSoftcap><<<static_cast<unsigned>(p.n), kSlabThreads, 0, stream>>>(
          slab, pitch, columns.count, columns.first, columns.targets, lse, grad_scale, p.softcap, false);
  });
  CCE_CHECK_LAUNCH();
  // EXERCISE(the slab's two gradient GEMMs): dE += S·C_slab (or = when !de_adds), dC_slab = Sᵀ·E (cuBLAS: column-major)
  // dE [N, D] (column-major [D, N]) += C_slabᵀ [D, columns] · Sᵀ [columns, N], in fp32.
  const float* de_beta = columns.de_adds ? &one : &zero;
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, n, count, &one, columns.c, type, d, slab, type,
                                s_pitch, de_beta, columns.de_acc, CUDA_R_32F, d, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
  // dC_slab [columns, D] (column-major [D, columns]) = Eᵀ [D, N] · S [N, columns]; none for a frozen classifier.
  if (columns.dc != nullptr)
    CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d, count, n, &one, columns.e, type, d, slab, type,
                                  s_pitch, &zero, columns.dc, CUDA_R_32F, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  // END EXERCISE
}

void dense_backward(const DeviceInputs& in, const DenseSlabs& slabs, const Scratch& scratch, const float* lse,
                    const float* grad_scale, float* de_acc, void* dc, cudaStream_t stream) {
  const Problem& p = in.problem;
  float* slab = scratch.get<float>(kDenseSlabItem);
  float* dc_slab_fp32 = accumulates_dc_in_fp32(p, dc != nullptr) ? scratch.get<float>(kDenseDcSlabItem) : nullptr;
  const size_t element = p.element_bytes();
  for (int64_t first = 0, index = 0; first < p.v; first += slabs.columns, ++index) {
    const int64_t count = std::min(slabs.columns, p.v - first);
    void* dc_slab = dc != nullptr ? static_cast<unsigned char*>(dc) + first * p.d * element : nullptr;
    // fp32 inputs: dC's slab is written in place; bf16: in fp32, then rounded once.
    float* product = dc_slab_fp32 != nullptr ? dc_slab_fp32 : static_cast<float*>(dc_slab);
    const SlabColumns columns{in.e.get(), static_cast<const unsigned char*>(in.c.get()) + first * p.d * element, first,
                              count, in.targets.get(), de_acc, index > 0, product};
    slab_gradient_products(p, columns, lse, grad_scale, slab, slabs.pitch, stream);
    if (dc_slab_fp32 != nullptr) s06::cast_to_bf16(dc_slab_fp32, dc_slab, count * p.d, stream);
  }
}

bool keeps_q(const Problem& p) { return p.dtype == Dtype::kBFloat16; }

DenseChunks plan_dense_chunks(const Problem& p, int64_t rows) {
  constexpr int64_t kRowMultiple = 128;
  DenseChunks chunks;
  chunks.logit_bytes = keeps_q(p) ? 2 : 4;
  chunks.pitch = (p.v + kSlabPitchMultiple - 1) / kSlabPitchMultiple * kSlabPitchMultiple;
  if (rows <= 0) {
    // bf16: q, and the row of E times α.
    const size_t per_row = static_cast<size_t>(chunks.pitch) * chunks.logit_bytes +
                           (keeps_q(p) ? static_cast<size_t>(p.d) * 2 : 0);
    const size_t accumulator = p.dtype == Dtype::kBFloat16 ? static_cast<size_t>(p.v * p.d) * 4 : 0;
    if (static_cast<size_t>(p.n) * per_row <= kDefaultDenseScratchBytes) {
      rows = p.n;  // one chunk, no accumulator
    } else {
      const size_t left = kDefaultDenseScratchBytes > accumulator ? kDefaultDenseScratchBytes - accumulator : 0;
      const int64_t fit = static_cast<int64_t>(left / std::max<size_t>(per_row, 1));
      rows = std::max(kRowMultiple, fit / kRowMultiple * kRowMultiple);
    }
  }
  chunks.rows = std::min(p.n, rows);
  chunks.count = chunks.rows > 0 ? (p.n + chunks.rows - 1) / chunks.rows : 0;
  return chunks;
}

namespace {

// Per chunk of bf16 inputs, dC's rounding needs fp32 sums: several chunks sum
// into an fp32 accumulator rounded at the end; one chunk's product rounds its
// own fp32 sums (product_to_bf16_rounded_once), in cuBLASLt's workspace.
bool sums_dc_in_fp32(const Problem& p, const DenseChunks& chunks, bool with_dc) {
  return accumulates_dc_in_fp32(p, with_dc) && chunks.count > 1;
}
bool rounds_dc_in_its_product(const Problem& p, const DenseChunks& chunks, bool with_dc) {
  return accumulates_dc_in_fp32(p, with_dc) && chunks.count == 1;
}

// Stage 03's scratch for the largest of the chunks' plans (the last chunk may be shorter).
std::vector<MemoryItem> chunk_lse_items(const Problem& p, const DenseChunks& chunks) {
  std::vector<MemoryItem> items;
  if (chunks.count == 0) return items;
  for (const int64_t rows : {chunks.rows, p.n - (chunks.count - 1) * chunks.rows}) {
    const Problem part = p.with_tokens(rows);
    const std::vector<MemoryItem> these = s03::fused_lse_scratch(part, s03::plan_fused(part), true);
    if (items.empty()) items = these;
    for (size_t k = 0; k < items.size(); ++k) items[k].second = std::max(items[k].second, these[k].second);
  }
  return items;
}

// A chunk row's fp32 R_i and α_i.
constexpr size_t kRowScaleBytes = 2 * 4;

size_t target_sort_temp_bytes(int64_t n) {
  size_t scan = 0;
  if (cuda_device_available())
    CCE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(nullptr, scan, static_cast<const int*>(nullptr),
                                                 static_cast<int*>(nullptr), static_cast<int>(n)));
  else
    scan = static_cast<size_t>(n) * 4 + (size_t{1} << 20);
  return std::max(radix_sort_pairs_temp_bytes<int>(n, false), scan);
}

DenseTargetSort target_sort(const Problem& p, bool one_chunk, const Scratch& scratch) {
  DenseTargetSort t;
  int* k = scratch.get<int>(kDenseTargetSortItem);
  t.key = k, t.row = k + p.n, t.sorted_key = k + 2 * p.n, t.sorted_row = k + 3 * p.n, t.run_of = k + 4 * p.n;
  t.run_token = k + 5 * p.n;
  t.temp = scratch.get<unsigned char>(kDenseTargetTempItem);
  t.temp_bytes = scratch.bytes(kDenseTargetTempItem);
  if (one_chunk) {
    t.whole = t.key, t.position = t.row, t.whole_token = k + 6 * p.n, t.row_of_run = k + 7 * p.n;
    t.norms = scratch.get<float>(kDenseTargetNormsItem);
    t.columns = scratch.get<__nv_bfloat16>(kDenseTargetColumnsItem);
    t.sums = scratch.get<float>(kDenseTargetSumsItem);
  }
  return t;
}

// The rows sorted by target and the runs numbered; returns the runs' count
// (a read-back: the products' sizes need it).
int64_t sort_rows_by_target(const Problem& p, const int64_t* targets, const DenseTargetSort& t, MappedHostValue<int>& mapped,
                            cudaStream_t stream) {
  int* runs = mapped.reset();
  const unsigned blocks = static_cast<unsigned>((p.n + kSlabThreads - 1) / kSlabThreads);
  target_key_kernel<<<blocks, kSlabThreads, 0, stream>>>(targets, p.n, p.ignore_index, p.v, t.key, t.row);
  CCE_CHECK_LAUNCH();
  sort_int_pairs(t.temp, t.temp_bytes, t.key, t.sorted_key, t.row, t.sorted_row, p.n, radix_key_bits(p.v), stream);
  run_head_kernel<<<blocks, kSlabThreads, 0, stream>>>(t.sorted_key, p.n, p.v, t.key);  // the keys are free now
  CCE_CHECK_LAUNCH();
  size_t bytes = t.temp_bytes;  // cub's scan may lower it
  CCE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(t.temp, bytes, t.key, t.run_of, static_cast<int>(p.n), stream));
  run_tokens_kernel<<<blocks, kSlabThreads, 0, stream>>>(t.sorted_key, t.run_of, p.n, p.v, t.run_token, runs);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *runs;
}

int target_column_blocks(int64_t d) { return static_cast<int>((d + kTargetBlockCols - 1) / kTargetBlockCols); }

// One chunk, after its product wrote dC in bf16: the targets' rows rounded
// again with their target terms, then those whose product part is large
// (whole_runs_kernel) summed whole: Q's columns of their tokens gathered, one
// fp32 product with α ∘ E, the terms added, rounded once. Returns how many
// runs were summed whole (a read-back: the product's size).
int64_t write_target_rows_of_one_chunk(const Problem& p, const DenseTargetSort& t, int64_t runs, const float* target_term,
                                       const __nv_bfloat16* e, const __nv_bfloat16* q, int64_t pitch,
                                       const __nv_bfloat16* e_scaled, __nv_bfloat16* dc, MappedHostValue<int>& mapped,
                                       cudaStream_t stream) {
  int* count = mapped.reset();
  const int groups = target_column_blocks(p.d);
  const dim3 grid(static_cast<unsigned>(p.n), static_cast<unsigned>(groups));
  rounded_target_rows_kernel<<<grid, kSlabThreads, 0, stream>>>(t.sorted_key, t.sorted_row, t.run_of, p.n, p.v,
                                                                 target_term, e, p.d, dc, t.norms);
  CCE_CHECK_LAUNCH();
  const unsigned run_blocks = static_cast<unsigned>((runs + kSlabThreads - 1) / kSlabThreads);
  whole_runs_kernel<<<run_blocks, kSlabThreads, 0, stream>>>(t.norms, runs, groups, t.whole);
  CCE_CHECK_LAUNCH();
  size_t bytes = t.temp_bytes;
  CCE_CUDA_CHECK(cub::DeviceScan::InclusiveSum(t.temp, bytes, t.whole, t.position, static_cast<int>(runs), stream));
  whole_run_list_kernel<<<run_blocks, kSlabThreads, 0, stream>>>(t.whole, t.position, t.run_token, runs,
                                                                 t.whole_token, t.row_of_run, count);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int whole = *count;
  if (whole == 0) return 0;
  // Their rows in fp32: [whole, D] (column-major [D, whole]) = (α ∘ E)ᵀ · Q_whole
  gather_target_columns_kernel<<<static_cast<unsigned>(p.n), kSlabThreads, 0, stream>>>(q, pitch, t.whole_token,
                                                                                        whole, t.columns);
  CCE_CHECK_LAUNCH();
  const float one = 1.0f, zero = 0.0f;
  CCE_CUBLAS_CHECK(cublasGemmEx(cublas_handle_on(stream), CUBLAS_OP_N, CUBLAS_OP_T, to_int(p.d), whole, to_int(p.n),
                                &one, e_scaled, CUDA_R_16BF, to_int(p.d), t.columns, CUDA_R_16BF, whole, &zero, t.sums,
                                CUDA_R_32F, to_int(p.d), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  target_rows_kernel<<<grid, kSlabThreads, 0, stream>>>(t.sorted_key, t.sorted_row, t.run_of, p.n, p.v, target_term,
                                                        e, p.d, t.sums, t.row_of_run, dc);
  CCE_CHECK_LAUNCH();
  return whole;
}

}  // namespace

std::vector<MemoryItem> dense_chunk_items(const Problem& p, const DenseChunks& chunks, bool with_dc) {
  std::vector<MemoryItem> items = {{kDenseChunkItem, static_cast<size_t>(chunks.rows * chunks.pitch * chunks.logit_bytes)}};
  if (keeps_q(p)) {
    items.push_back({kDenseRowScalesItem, static_cast<size_t>(chunks.rows) * kRowScaleBytes});
    items.push_back({kDenseScaledRowsItem, static_cast<size_t>(chunks.rows * p.d) * 2});
    items.push_back({kDenseTargetTermItem, static_cast<size_t>(p.n) * 4});
    if (with_dc) {
      items.push_back({kDenseTargetSortItem, static_cast<size_t>(p.n) * 8 * 4});
      items.push_back({kDenseTargetTempItem, target_sort_temp_bytes(p.n)});
      if (chunks.count == 1) {
        items.push_back({kDenseTargetNormsItem, static_cast<size_t>(p.n * target_column_blocks(p.d)) * 2 * 4});
        items.push_back({kDenseTargetColumnsItem, static_cast<size_t>(chunks.rows * p.n) * 2});
        items.push_back({kDenseTargetSumsItem, static_cast<size_t>(p.n * p.d) * 4});
      }
    }
  }
  items.push_back({kDenseGradScaleItem, static_cast<size_t>(p.n) * 4});
  items = concat(items, per_token_loss_scratch(p));
  items = concat(items, chunk_lse_items(p, chunks));
  if (p.dtype == Dtype::kBFloat16) items.push_back({kDenseDeRowsItem, static_cast<size_t>(chunks.rows * p.d) * 4});
  if (sums_dc_in_fp32(p, chunks, with_dc)) items.push_back({kDenseDcItem, static_cast<size_t>(p.v * p.d) * 4});
  if (rounds_dc_in_its_product(p, chunks, with_dc)) items.push_back({kDenseDcWorkspaceItem, kCublasWorkspaceBytes});
  return items;
}

DenseCall begin_dense_chunks(const DeviceInputs& in, const DenseChunks& chunks, const Scratch& scratch, float* loss,
                             const float* upstream, bool with_dc, DenseReadBacks& read_backs, cudaStream_t stream) {
  const Problem& p = in.problem;
  DenseCall call;
  call.chunks = chunks;
  call.logits = scratch.get<unsigned char>(kDenseChunkItem);
  if (keeps_q(p)) {
    float* scales = scratch.get<float>(kDenseRowScalesItem);
    call.reference = scales, call.alpha = scales + chunks.rows;
    call.target_term = scratch.get<float>(kDenseTargetTermItem);
    call.e_scaled = scratch.get<__nv_bfloat16>(kDenseScaledRowsItem);
  }
  call.grad_scale = scratch.get<float>(kDenseGradScaleItem);
  call.per_token = per_token_loss_buffer(p, loss, scratch);
  // dC's sum over the chunks and dE's rows in fp32: in dC and dE themselves (fp32), else beside them.
  if (sums_dc_in_fp32(p, chunks, with_dc)) call.dc_acc = scratch.get<float>(kDenseDcItem);
  if (rounds_dc_in_its_product(p, chunks, with_dc)) call.dc_workspace = scratch.get<unsigned char>(kDenseDcWorkspaceItem);
  if (p.dtype == Dtype::kBFloat16) call.de_rows_fp32 = scratch.get<float>(kDenseDeRowsItem);
  compute_token_grad_scale(p, in.targets.get(), upstream, call.grad_scale, stream);
  if (keeps_q(p) && with_dc) {  // the target's term apart
    call.sorted = target_sort(p, chunks.count == 1, scratch);
    const int64_t runs = sort_rows_by_target(p, in.targets.get(), call.sorted, read_backs.runs, stream);
    call.target_rows = DenseTargetRows{runs, runs};  // one chunk: whole set by chunk_products
  }
  return call;
}

DenseChunk dense_chunk(const DeviceInputs& in, const DenseCall& call, const Scratch& scratch, int64_t first) {
  const Problem& p = in.problem;
  DenseChunk chunk;
  chunk.first = first;
  // The chunk as a problem of its own rows: stage 03's forward runs on it unchanged, keeping its tiles.
  const Problem rows = p.with_tokens(std::min(call.chunks.rows, p.n - first));
  chunk.rows = DeviceInputs::borrow(rows, static_cast<const unsigned char*>(in.e.get()) + first * p.d * p.element_bytes(),
                                    in.c.get(), in.targets.get() + first);
  chunk.plan = s03::plan_fused(rows);
  chunk.lse = s03::split_lse_params(chunk.rows, scratch, true);
  return chunk;
}

void set_chunk_reference(const DenseChunk& chunk, const DenseCall& call, cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  reference_from_dot_kernel<<<static_cast<unsigned>((rows.n + 255) / 256), 256, 0, stream>>>(
      call.reference, chunk.rows.targets.get(), rows.n, rows.ignore_index, rows.softcap);
  CCE_CHECK_LAUNCH();
}

void fold_chunk(const DenseChunk& chunk, const DenseCall& call, float* lse, float* per_token, cudaStream_t stream) {
  const KeepTileParams params{chunk.lse, call.logits, call.reference, call.chunks.pitch};
  launch_tile_units<FoldThenKeepTile>(chunk.rows, chunk.plan.path, chunk.plan.units, params, stream);
  s03::merge_ranges(chunk.rows, chunk.plan, chunk.lse, lse, per_token, stream);
}

bool reference_too_far(const DenseChunk& chunk, const DenseCall& call, const float* lse, DenseReadBacks& read_backs,
                       cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  int* too_far = read_backs.too_far.reset();
  constexpr int kThreads = 256;
  reference_gap_kernel<<<static_cast<unsigned>((rows.n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      lse, call.reference, chunk.rows.targets.get(), rows.n, rows.ignore_index, too_far);
  CCE_CHECK_LAUNCH();
  CCE_CUDA_CHECK(cudaStreamSynchronize(stream));
  return *too_far != 0;
}

void refold_chunk_at_lse(const DenseChunk& chunk, const DenseCall& call, const float* lse, float* fold_lse,
                         float* per_token, cudaStream_t stream) {
  CCE_CUDA_CHECK(cudaMemcpyAsync(call.reference, lse, chunk.rows.problem.n * sizeof(float), cudaMemcpyDeviceToDevice,
                                 stream));
  fold_chunk(chunk, call, fold_lse, per_token, stream);
}

void chunk_products(const DenseChunk& chunk, DenseCall& call, const DeviceInputs& in, const float* lse, void* de,
                    void* dc, DenseReadBacks& read_backs, cudaStream_t stream) {
  const Problem& p = in.problem;
  const bool bf16 = p.dtype == Dtype::kBFloat16, q = keeps_q(p);
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const int d = to_int(p.d), v = to_int(p.v);
  const int64_t first = chunk.first, n_rows = chunk.rows.problem.n;
  const unsigned blocks = static_cast<unsigned>(n_rows);
  const void* e_rows = chunk.rows.e.get();
  const int64_t* targets = chunk.rows.targets.get();
  if (q) {
    row_scales_kernel<<<blocks, kSlabThreads, 0, stream>>>(
        lse, call.reference, chunk.lse.target_logit, targets, p.ignore_index, p.v, call.grad_scale + first, p.softcap,
        static_cast<__nv_bfloat16*>(call.logits), call.chunks.pitch, static_cast<const __nv_bfloat16*>(e_rows), p.d,
        call.e_scaled, call.alpha, call.target_term + first);
    CCE_CHECK_LAUNCH();
  } else {
    // S in place of the softcapped fp32 logits.
    static_bool(p.softcap > 0.0f, [&](auto softcapped) {
      constexpr bool kSoftcap = decltype(softcapped)::value;
      slab_gradient_kernel<false, kSoftcap><<<blocks, kSlabThreads, 0, stream>>>(
          static_cast<float*>(call.logits), call.chunks.pitch, p.v, 0, targets, lse, call.grad_scale + first,
          p.softcap, true);
    });
    CCE_CHECK_LAUNCH();
  }
  const int s_pitch = to_int(call.chunks.pitch);  // S in place of fp32 logits, or q in bf16
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t handle = cublas_handle_on(stream);
  // dC before dE: one chunk's target rows end in a wait for a count, and dE's product, queued after it, keeps
  // the GPU busy while the host returns to the caller.
  if (dc != nullptr) {
    // dC [V, D] (column-major [D, V]) += E_rowsᵀ [D, n_rows] · S [n_rows, V] (q: (α ∘ E_rows)ᵀ · Q).
    const void* e_factor = q ? static_cast<const void*>(call.e_scaled) : e_rows;
    if (call.dc_workspace != nullptr) {
      product_to_bf16_rounded_once(d, v, to_int(n_rows), e_factor, d, call.logits, s_pitch, dc, d, call.dc_workspace,
                                   stream);
    } else {
      const float* beta = first == 0 ? &zero : &one;
      void* dc_sum = call.dc_acc != nullptr ? static_cast<void*>(call.dc_acc) : dc;
      CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_T, d, v, to_int(n_rows), &one, e_factor, type, d,
                                    call.logits, type, s_pitch, beta, dc_sum, CUDA_R_32F, d, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT));
    }
    if (call.dc_acc == nullptr && call.target_rows.runs > 0)  // one chunk: the targets' rows of dC, over the product's
      call.target_rows.whole = write_target_rows_of_one_chunk(
          p, call.sorted, call.target_rows.runs, call.target_term, reinterpret_cast<const __nv_bfloat16*>(in.e.get()),
          static_cast<const __nv_bfloat16*>(call.logits), call.chunks.pitch, call.e_scaled,
          static_cast<__nv_bfloat16*>(dc), read_backs.whole, stream);
  }
  // dE's rows [n_rows, D] (column-major [D, n_rows]) = Cᵀ [D, V] · Sᵀ [V, n_rows] (q: Qᵀ), written once.
  CCE_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, d, to_int(n_rows), v, &one, in.c.get(), type, d,
                                call.logits, type, s_pitch, &zero,
                                bf16 ? static_cast<void*>(call.de_rows_fp32)
                                     : static_cast<void*>(static_cast<float*>(de) + first * p.d),
                                CUDA_R_32F, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

namespace {
// bf16: dE's rows α_i·(Q·C)_i + S_it·C_{t_i} from the product, as Out.
template <typename Out>
void finish_chunk_de(const DenseChunk& chunk, const DenseCall& call, Out* out, cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  finish_de_rows_kernel<Out><<<static_cast<unsigned>(rows.n), kSlabThreads, 0, stream>>>(
      call.de_rows_fp32, call.alpha, call.target_term + chunk.first, chunk.rows.targets.get(), rows.ignore_index,
      rows.v, reinterpret_cast<const __nv_bfloat16*>(chunk.rows.c.get()), rows.d, out);
  CCE_CHECK_LAUNCH();
}
}  // namespace

void round_chunk_de(const DenseChunk& chunk, const DenseCall& call, void* de, cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  if (rows.dtype == Dtype::kBFloat16)
    finish_chunk_de(chunk, call, static_cast<__nv_bfloat16*>(de) + chunk.first * rows.d, stream);
}

float* chunk_de_sums(const DenseChunk& chunk, const DenseCall& call, void* de, cudaStream_t stream) {
  const Problem& rows = chunk.rows.problem;
  if (rows.dtype != Dtype::kBFloat16) return static_cast<float*>(de) + chunk.first * rows.d;
  finish_chunk_de(chunk, call, call.de_rows_fp32, stream);  // in place
  return call.de_rows_fp32;
}

DenseTargetRows finish_dense_chunks(const DeviceInputs& in, const DenseCall& call, float* loss, void* dc,
                                    cudaStream_t stream) {
  const Problem& p = in.problem;
  finish_loss(p, call.per_token, in.targets.get(), loss, stream);
  if (call.dc_acc == nullptr) return call.target_rows;
  s06::cast_to_bf16(call.dc_acc, dc, p.v * p.d, stream);
  if (call.target_rows.runs == 0) return call.target_rows;
  // Several chunks: the targets' rows of dC from the fp32 sums, over what the cast wrote.
  const DenseTargetSort& t = call.sorted;
  const dim3 grid(static_cast<unsigned>(p.n), static_cast<unsigned>(target_column_blocks(p.d)));
  target_rows_kernel<<<grid, kSlabThreads, 0, stream>>>(t.sorted_key, t.sorted_row, t.run_of, p.n, p.v,
                                                        call.target_term,
                                                        reinterpret_cast<const __nv_bfloat16*>(in.e.get()), p.d,
                                                        call.dc_acc, nullptr, static_cast<__nv_bfloat16*>(dc));
  CCE_CHECK_LAUNCH();
  return call.target_rows;
}

DenseTargetRows dense_loss_and_gradient(const DeviceInputs& in, const DenseChunks& chunks, const Scratch& scratch,
                                        float* loss, float* lse, const float* upstream, void* de, void* dc,
                                        DenseReadBacks& read_backs, cudaStream_t stream) {
  const Problem& p = in.problem;
  DenseCall call = begin_dense_chunks(in, chunks, scratch, loss, upstream, dc != nullptr, read_backs, stream);
  for (int64_t first = 0; first < p.n; first += chunks.rows) {
    const DenseChunk chunk = dense_chunk(in, call, scratch, first);
    if (keeps_q(p)) {  // R_i: the target logit
      s04::indexed_dot(chunk.rows, s04::DotVariant::k1d, call.reference, stream);
      set_chunk_reference(chunk, call, stream);
    }
    fold_chunk(chunk, call, lse + first, call.per_token + first, stream);
    if (keeps_q(p) && reference_too_far(chunk, call, lse + first, read_backs, stream))
      refold_chunk_at_lse(chunk, call, lse + first, lse + first, call.per_token + first, stream);  // the same LSE
    chunk_products(chunk, call, in, lse + first, de, dc, read_backs, stream);
    round_chunk_de(chunk, call, de, stream);
  }
  return finish_dense_chunks(in, call, loss, dc, stream);
}

}  // namespace cce::s10
