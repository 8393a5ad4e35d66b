// Stage 10: stage 09's backward planned per batch, from the forward's tile
// statistics before anything is recomputed (batch_plan.cu):
//   1. the token blocks take the rows sorted by how many tiles hold an entry
//      ≥ 2^-12, in powers of two (most first), so that the rows of a flat
//      softmax, which need many tiles, share blocks instead of making every
//      block keep them; then by the rarest such tile, so that rows that need
//      a tile few rows need share the block that recomputes it; with the
//      automatic eps grouped again, the test 1.5 exponents below the eps
//      that the first grouping's masses choose (after a batch of the same
//      model that chose one: grouped once, 1.5 exponents below its eps);
//   2. eps (bf16) is the largest of 2^-8, 2^-8.25 … 2^-17 whose misplaced mass per
//      row is within a budget: the softmax mass that the tail correction of
//      the dropped tiles puts on the wrong entries, at most M·(1 − M/(|T|·p_max))
//      for a tile of mass M, |T| entries and largest entry p_max (the targets'
//      own entries left out: they are exact). A flat tile's mass costs nothing
//      once corrected, one peaked entry's all of it;
//   3. stage 09's backward at that eps over those token blocks, unless more
//      than a third of the (token block, tile) pairs would be kept: then the
//      dense plan (dense_backward.cu) recomputes everything with cuBLAS,
//      three GEMMs per slab of the vocabulary, which costs less;
//   4. and when the previous batch was dense, the next one is planned dense
//      before its forward: loss and gradient together, three GEMMs per chunk
//      of rows and no forward of its own (loss_and_gradient).
// Before all of these, the forward keeps the vocabulary order (stage 08's
// sort by C_j·ΣE_i) of the model's batch before, sorting again every
// kSortEveryBatches-th batch: one pass over C fewer.
// README.md derives the choices and gives the measurements.
#pragma once

#include <cuda_bf16.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/last_answer.h"
#include "common/mapped_value.h"
#include "common/stage.h"
#include "stages/03_fused_gemm_ce/fused_gemm_ce.h"
#include "stages/09_deterministic_products/deterministic_products.h"

namespace cce::s10 {

using s09::add_target_terms;
using s09::DropPlan;
using s09::DropStats;
using s09::finish_de;
using s09::forward_plan;
using s09::plan_drop;
using s09::HostTables;
using s09::SideStream;

// The automatic eps's candidates 2^-kAutoFirstExponent … 2^-kAutoLastExponent,
// a quarter exponent apart (the finer the steps, the nearer the budget the
// chosen eps lands), and its default budget: the mean misplaced mass per row
// with a gradient.
constexpr int kAutoFirstExponent = 8, kAutoLastExponent = 17, kAutoStepsPerExponent = 4;
constexpr int kAutoCandidates = kAutoStepsPerExponent * (kAutoLastExponent - kAutoFirstExponent) + 1;
// Candidate k's eps, 2^-(kAutoFirstExponent + k/4): a power of two times the
// float of 1, 2^-1/4, 2^-1/2 or 2^-3/4, so that the host and the device get the same float.
inline float candidate_eps(int k) {
  constexpr float kRoots[kAutoStepsPerExponent] = {1.0f, 0.8408964152537145f, 0.7071067811865476f, 0.5946035575013605f};
  return std::ldexp(kRoots[k % kAutoStepsPerExponent], -(kAutoFirstExponent + k / kAutoStepsPerExponent));
}
// Its log2 for the report: −8, −8.25, …
constexpr double candidate_log2_eps(int k) {
  return -(kAutoFirstExponent + static_cast<double>(k) / kAutoStepsPerExponent);
}
// The k whose candidate_eps(k) is eps, bit for bit; −1 when eps is no candidate.
inline int candidate_index(float eps) {
  for (int k = 0; k < kAutoCandidates; ++k)
    if (candidate_eps(k) == eps) return k;
  return -1;
}
constexpr double kDefaultMisplacedMass = 0.022;
// What the tail correction can put on the wrong entries of a dropped tile: it
// gives each of its `entries` entries mass/entries, which moves at most
// mass·(1 − mass/(entries·p_max)), p_max the tile's largest entry (as many
// entries at p_max as the mass allows, the rest 0): 0 for a flat tile, all of
// the mass for one entry holding it. On the host for the tests.
__host__ __device__ inline float misplaced_mass_bound(float mass, float entries, float p_max) {
  return mass * fmaxf(1.0f - mass / (entries * p_max), 0.0f);
}
// Token grouping tests, per row and tile, for an entry ≥ 2^-kGroupingExponent;
// with the automatic eps it then groups again with the test kRegroupExponents
// below the eps that the first grouping's masses choose, and measures again.
// A batch after an automatic decision of the same model is grouped once, with
// the test kRegroupExponents below the eps the batch before chose.
constexpr int kGroupingExponent = 12;
constexpr float kRegroupExponents = 1.5f;
// ln of the test near a chosen eps, from ln eps (host and device: the same float).
__host__ __device__ inline float near_eps_log_threshold(float log_eps) {
  return log_eps - kRegroupExponents * 0.69314718f;
}
// The candidate chosen from misplaced[k] = the misplaced mass per row at candidate_eps(k):
// the first within the budget, else the last.
int choose_drop_candidate(const double (&misplaced)[kAutoCandidates], double budget);

// The eps a backward decided with, and what the automatic eps measured for it.
struct EpsChoice {
  float eps = 0.0f;
  double misplaced_mass = -1.0;  // with the automatic eps: the misplaced mass per row at it (−1: a fixed eps)
  std::array<double, kAutoCandidates> candidates{};  // and the misplaced mass at each candidate 2^-8, 2^-8.25, …
};

// The backward's plan: stage 09's products over the kept tiles (sparse), or
// every tile by cuBLAS (dense); auto: dense when the kept share of the
// (token block, tile) pairs exceeds kDenseAboveKept. Stage 09's kept-tile
// products run at about a third of cuBLAS's rate on the H100 and the dense
// plan costs about three forward GEMMs, so they break even near a third.
enum class BackwardPlan { kAuto, kSparse, kDense };
constexpr double kDenseAboveKept = 1.0 / 3.0;
const char* to_string(BackwardPlan plan);
BackwardPlan parse_backward_plan(const std::string& text);  // "auto" | "sparse" | "dense"; InputError otherwise
// The plan for a kept share (kept_fraction < 0: not decided, as for a forced plan).
BackwardPlan choose_backward_plan(BackwardPlan flag, double kept_fraction);

// ---- dense_backward.cu: the dense plan ----
// Slabs of `columns` vocabulary columns (the last one shorter); the fp32
// logits of a slab in rows of `pitch` floats, S packed into them in bf16.
struct DenseSlabs {
  int64_t columns = 0, pitch = 0, count = 0;
};
constexpr size_t kDefaultDenseSlabBytes = size_t{512} << 20;
constexpr const char* kDenseSlabItem = "dense plan: a slab of logits fp32 [N, slab columns]";
constexpr const char* kDenseDcSlabItem = "dense plan: dC of a slab fp32 [slab columns, D] (bf16)";
// The columns whose fp32 logits fit in `logit_bytes` (N rows each), a multiple of 256, at least 256.
int64_t slab_columns_within(const Problem& problem, size_t logit_bytes);
// `columns` per slab (at most V); 0: slab_columns_within(problem, kDefaultDenseSlabBytes).
DenseSlabs plan_dense_slabs(const Problem& problem, int64_t columns = 0);
// The slab, and for a bf16 dC its slab in fp32: cuBLAS writes every product
// in fp32 and the plan rounds it to bf16 once, whichever kernel cuBLAS picks
// (some, under CUBLAS_WORKSPACE_CONFIG, round partial sums to the output's type).
std::vector<MemoryItem> dense_slab_items(const Problem& problem, const DenseSlabs& slabs, bool with_dc);
// One slab's three GEMMs: its logits Z = E·C_slabᵀ (fp32, rows of `pitch`), S
// in place (bf16 inputs: packed in bf16), dE += S·C_slab into the fp32
// accumulator, dC_slab = Sᵀ·E in fp32. Column j of the slab is the
// vocabulary entry whose position in `targets`' numbering is first + j: the
// natural order (the dense plan), or the sorted one (the dense head, targets
// as sorted positions).
struct SlabColumns {
  const void* e = nullptr;           // E [N, D]
  const void* c = nullptr;           // the slab's rows of C [count, D]
  int64_t first = 0, count = 0;
  const int64_t* targets = nullptr;  // [N]
  // where the slab's gradients go
  float* de_acc = nullptr;  // dE [N, D] fp32
  bool de_adds = false;     // add the slab's share to it (false: overwrite it)
  float* dc = nullptr;      // dC_slab [count, D] fp32; null: none (a frozen classifier)
};
void slab_gradient_products(const Problem& problem, const SlabColumns& columns, const float* lse,
                            const float* grad_scale, float* slab, int64_t pitch, cudaStream_t stream);
// dE (into the fp32 accumulator, overwritten) and dC (written completely)
// from the forward's LSE and the grad scale g_i, in dense_slab_items's scratch.
void dense_backward(const DeviceInputs& in, const DenseSlabs& slabs, const Scratch& scratch, const float* lse,
                    const float* grad_scale, float* de_acc, void* dc, cudaStream_t stream);

// ---- dense_head.cu: the sparse plan's dense head ----
// On a trained model the sorted vocabulary's leading tiles are kept by most
// token blocks (bench/dense_head_probe.py), and a kept pair costs the sparse
// plan more than the same tile taken whole by cuBLAS. The head: the leading
// tiles each kept by at least `share` of the token blocks (a prefix of at
// least kLeastHeadTiles), every pair of them marked kept (so no tail
// correction and no dropped target falls there), their S recomputed and
// multiplied by slab_gradient_products over slabs of sorted C's rows, dC's
// rows written through the order; the sparse plan runs over the tiles after it.
constexpr int64_t kLeastHeadTiles = 2;
constexpr size_t kHeadSlabBytes = size_t{128} << 20;  // a slab's fp32 logits
constexpr const char* kHeadSlabItem = "dense head: a slab of logits fp32 [N, slab columns]";
constexpr const char* kHeadRowsItem = "dense head: a slab's rows of sorted C [slab columns, D]";
constexpr const char* kHeadDcItem = "dense head: dC of a slab fp32 [slab columns, D]";
DenseSlabs dense_head_slabs(const Problem& problem);  // as many columns as kHeadSlabBytes of logits hold
std::vector<MemoryItem> dense_head_items(const Problem& problem, bool with_dc);
// On the stream, after the flags and per-tile counts at the chosen eps: the
// head's length into `head` (device), its pairs marked kept. Returns where
// the host finds the length (host.read_back) once the decision has waited.
const int* mark_dense_head(const DropPlan& plan, const s09::BackwardBuffers& buffers, double share, int* head,
                           HostTables& host, cudaStream_t stream);
// dE += the head's S·C (the accumulator holds the tail correction already),
// dC's head rows written (unless dc is null), in dense_head_items's scratch.
void dense_head_backward(const DeviceInputs& in, const DropPlan& plan, const s09::BackwardBuffers& buffers,
                         int64_t head_tiles, const Scratch& scratch, const float* lse, float* de_acc, void* dc,
                         cudaStream_t stream);

// The dense plan before the forward (loss and gradient in one call): per
// chunk of rows, stage 03's forward with an epilogue that also keeps each
// tile after its softcap (logits and LSE in one pass; for bf16 inputs q, S
// scaled by rows: keeps_q), then dE's rows = S·C and dC += Sᵀ·E_rows by cuBLAS.
// Three GEMMs in all, where the plan after a forward pays four. Several
// chunks sum dC in fp32, in chunk order; one chunk (the batch's logits within
// the budget) writes dC in one product, bf16 rounded once by cuBLASLt.
struct DenseChunks {
  int64_t rows = 0, count = 0;
  int64_t pitch = 0;    // logits per row of the chunk (V padded to 64)
  int logit_bytes = 4;  // 2: q in bf16 (keeps_q), 4: fp32 logits
};
// The chunks' scratch budget: the logits (bf16: q and the rows of E times α)
// and, for several chunks of bf16 inputs, dC's fp32 accumulator [V, D]. At
// gemma2_flat one chunk of all 8192 rows (4.24 GB) needs less than two with the accumulator.
constexpr size_t kDefaultDenseScratchBytes = size_t{9} << 29;  // 4.5 GiB
constexpr const char* kDenseChunkItem = "dense plan: a chunk of q bf16 (bf16 inputs) or logits fp32 [chunk rows, pitch]";
// The chunks keep bf16 inputs' logits as q_ij = exp(z_ij − R_i)·softcap'(z_ij)
// in bf16, R_i the row's target logit (dense_backward.cu): S_ij = α_i·q_ij
// (the target's entry 0, its term S_it added apart), and dC's product takes the rows
// of E times α_i, rounded once more to bf16. The stage declares it
// (GradientApproximation::scaled_rows_rounding = kBf16Unit). fp32 inputs keep
// the logits in fp32 and make S in place.
bool keeps_q(const Problem& problem);
constexpr const char* kDenseRowScalesItem = "dense plan: per chunk row R, alpha fp32 [2, chunk rows] (bf16)";
constexpr const char* kDenseScaledRowsItem = "dense plan: a chunk's rows of E times alpha bf16 [chunk rows, D] (bf16)";
constexpr const char* kDenseDcItem = "dense plan: dC accumulator fp32 [V, D] (bf16, several chunks)";
constexpr const char* kDenseDcWorkspaceItem = "dense plan: cuBLASLt workspace of dC's product (bf16, one chunk)";
constexpr const char* kDenseDeRowsItem = "dense plan: dE of a chunk fp32 [chunk rows, D] (bf16)";
constexpr const char* kDenseGradScaleItem = "dense plan: per-token grad scale [N]";
// The target's term apart (bf16): S_it of each row; with dC, the rows sorted by
// target and the runs; for one chunk, the norms that choose the rows summed
// whole, Q's columns of their tokens and their rows of dC in fp32
// (dense_backward.cu, write_target_rows_of_one_chunk).
constexpr const char* kDenseTargetTermItem = "dense plan: S_it of each row fp32 [N] (bf16)";
constexpr const char* kDenseTargetSortItem = "dense plan: rows sorted by target, runs [8][N] (bf16, dC)";
constexpr const char* kDenseTargetNormsItem = "dense plan: target rows' norms fp32 [N, D/256, 2] (bf16, dC, one chunk)";
constexpr const char* kDenseTargetTempItem = "dense plan: the target sort's and scan's scratch (bf16, dC)";
constexpr const char* kDenseTargetColumnsItem = "dense plan: Q's columns of the targets bf16 [chunk rows, N] (bf16, dC, one chunk)";
constexpr const char* kDenseTargetSumsItem = "dense plan: dC's rows of the targets fp32 [N, D] (bf16, dC, one chunk)";
// `rows` per chunk (at most N); 0: all N if their q (or fp32 logits) and the rows of E times alpha fit
// kDefaultDenseScratchBytes, else as many as fit beside dC's fp32
// accumulator (bf16), a multiple of 128, at least 128.
DenseChunks plan_dense_chunks(const Problem& problem, int64_t rows = 0);
// The chunk, the grad scale, the per-token losses (mean, sum), stage 03's
// scratch for a chunk and, for bf16, a chunk's dE rows in fp32 and (with a
// dC) dC's fp32 accumulator (several chunks) or its product's workspace (one).
std::vector<MemoryItem> dense_chunk_items(const Problem& problem, const DenseChunks& chunks, bool with_dc);
// dC's rows of the batch's target tokens (bf16 inputs, with dC): how many, and
// how many were summed whole in fp32 before their one rounding (several
// chunks: all; one chunk: those whose product part is over a quarter of the
// row, the others the product's rounded row plus the target terms).
struct DenseTargetRows {
  int64_t runs = 0, whole = 0;
};
// The counts its kernels write into page-locked host memory and the host reads
// after a synchronization: a chunk's reference check, the target rows' runs and
// those summed whole. One set per stage object (not per call site), so that
// stage objects on other host threads never share them.
struct DenseReadBacks {
  MappedHostValue<int> too_far, runs, whole;
};
// loss, LSE, dE and dC (unless null) completely, from dense_chunk_items's scratch.
DenseTargetRows dense_loss_and_gradient(const DeviceInputs& in, const DenseChunks& chunks, const Scratch& scratch,
                                        float* loss, float* lse, const float* upstream, void* de, void* dc,
                                        DenseReadBacks& read_backs, cudaStream_t stream);

// dense_loss_and_gradient's steps, free functions that it runs in this order
// and that stage 11 runs with its shards joined between them (the chunk's
// target logits before set_chunk_reference, its LSE after fold_chunk, its dE
// rows before round_chunk_de):
//   begin_dense_chunks           the grad scale; bf16 with dC: the rows sorted by target
//   per chunk (dense_chunk):
//     s04::indexed_dot into call.reference, then set_chunk_reference   (bf16: R_i)
//     fold_chunk                  the logits kept, the chunk's LSE (and losses)
//     reference_too_far, then refold_chunk_at_lse                      (bf16, rarely)
//     chunk_products              dC's share, dE's product
//     round_chunk_de              dE's rows in dE's type (stage 11: chunk_de_sums, then its own)
//   finish_dense_chunks          the loss; several chunks: dC rounded, its target rows
// A target outside [0, V) (stage 11's targets on another shard) is a valid
// row whose target term lies elsewhere: no Q entry, no S_it, no dC row here.
//
// The rows sorted by target: keys, rows, sorted keys and rows, each sorted
// position's run, the runs' tokens; for one chunk, the runs summed whole
// (their tokens, each run's row among them), the rows' norms, Q's columns of
// those tokens and their fp32 product (write_target_rows_of_one_chunk).
struct DenseTargetSort {
  int *key = nullptr, *row = nullptr, *sorted_key = nullptr, *sorted_row = nullptr, *run_of = nullptr,
      *run_token = nullptr;
  int *whole = nullptr, *position = nullptr;          // one chunk, after the sort: in key's and row's place
  int *whole_token = nullptr, *row_of_run = nullptr;  // one chunk
  void* temp = nullptr;
  size_t temp_bytes = 0;
  float* norms = nullptr;            // one chunk: [runs, column blocks, 2]
  __nv_bfloat16* columns = nullptr;  // one chunk: [rows, runs summed whole]
  float* sums = nullptr;             // one chunk: [runs summed whole, D]
};
// One call's buffers (dense_chunk_items's, carved once) and what its first steps found.
struct DenseCall {
  DenseChunks chunks;
  void* logits = nullptr;  // the chunk's q (bf16) or fp32 logits, rows of chunks.pitch
  float* reference = nullptr;  // bf16: R_i per chunk row (first the raw target logit)
  float* alpha = nullptr;      // bf16: α_i per chunk row
  float* target_term = nullptr;  // bf16: S_it per row of the batch
  __nv_bfloat16* e_scaled = nullptr;  // bf16: the chunk's rows of E times α
  float* grad_scale = nullptr;        // g_i [N]
  float* per_token = nullptr;         // the per-token losses [N] (or the loss itself, reduction none)
  float* dc_acc = nullptr;            // bf16, several chunks, with dC: its fp32 sum
  void* dc_workspace = nullptr;       // bf16, one chunk, with dC: its product's cuBLASLt workspace
  float* de_rows_fp32 = nullptr;      // bf16: the chunk's dE rows in fp32
  DenseTargetSort sorted;             // bf16 with dC
  DenseTargetRows target_rows;        // runs (begin_dense_chunks), whole (one chunk: chunk_products)
};
DenseCall begin_dense_chunks(const DeviceInputs& in, const DenseChunks& chunks, const Scratch& scratch, float* loss,
                             const float* upstream, bool with_dc, DenseReadBacks& read_backs, cudaStream_t stream);
// A chunk: its rows [first, first + rows.problem.n) as a problem of their own,
// stage 03's plan for it and its fold's scratch (the ranges' states, the target logit).
struct DenseChunk {
  int64_t first = 0;
  DeviceInputs rows;
  s03::FusedPlan plan;
  s03::SplitLseParams lse;
};
DenseChunk dense_chunk(const DeviceInputs& in, const DenseCall& call, const Scratch& scratch, int64_t first);
// bf16: R_i from the raw target logit that s04::indexed_dot left in call.reference, in place.
void set_chunk_reference(const DenseChunk& chunk, const DenseCall& call, cudaStream_t stream);
// The fold over the chunk's logits, keeping them (bf16: q against R_i):
// the chunk's LSE into lse [rows] and its losses into per_token [rows] (null: none).
void fold_chunk(const DenseChunk& chunk, const DenseCall& call, float* lse, float* per_token, cudaStream_t stream);
// bf16: whether a valid row's LSE (the chunk's rows of `lse`) lies more than
// kMostReferenceGap above R_i (a read-back: the products wait for it); then
// refold_chunk_at_lse makes R_i = LSE_i and folds again (the same LSE).
bool reference_too_far(const DenseChunk& chunk, const DenseCall& call, const float* lse, DenseReadBacks& read_backs,
                       cudaStream_t stream);
void refold_chunk_at_lse(const DenseChunk& chunk, const DenseCall& call, const float* lse, float* fold_lse,
                         float* per_token, cudaStream_t stream);
// With the chunk's LSE (lse: its rows): S (bf16: α and the target terms), dC's
// share (unless dc is null; one chunk of bf16: its target rows too), then dE's product.
void chunk_products(const DenseChunk& chunk, DenseCall& call, const DeviceInputs& in, const float* lse, void* de,
                    void* dc, DenseReadBacks& read_backs, cudaStream_t stream);
// dE's rows in dE's type: bf16 rounded once from fp32 (fp32: the product wrote them).
void round_chunk_de(const DenseChunk& chunk, const DenseCall& call, void* de, cudaStream_t stream);
// Or dE's rows in fp32, not rounded: [rows, D] (bf16: in call.de_rows_fp32; fp32: dE's own rows).
float* chunk_de_sums(const DenseChunk& chunk, const DenseCall& call, void* de, cudaStream_t stream);
// The loss from call.per_token; several chunks of bf16: dC rounded from its fp32 sum, then its target rows.
DenseTargetRows finish_dense_chunks(const DeviceInputs& in, const DenseCall& call, float* loss, void* dc,
                                    cudaStream_t stream);

// What plans the next batch before its forward: the last decision of this
// problem, and how many batches ran dense since it without deciding.
struct PlanHistory {
  double kept_fraction = -1.0;  // of the last decision (−1: none yet)
  int dense_since = 0;
  float automatic_eps = 0.0f;  // the last decision's eps when automatic (0: none, or a fixed eps, or a sample's)
  // A decision starts the history again: no dense batch since it.
  static PlanHistory decided(double kept_fraction, float automatic_eps = 0.0f) {
    return {kept_fraction, 0, automatic_eps};
  }
};
// The vocabulary order's age: C_j·ΣE_i, stage 08's key, moves little from one
// batch of a model to the next, and the order only groups the entries that
// the same rows need (any order gives the same loss and gradient), so a
// forward keeps the order its scratch holds from the batch before, and sorts
// again every kSortEveryBatches-th batch (--sort-every) or for another problem.
constexpr int kSortEveryBatches = 16;
struct VocabularyOrderAge {
  Problem problem;               // of the batch that sorted
  const int* order = nullptr;    // where it left the order (the scratch's vocabulary order [V])
  int batches = -1;              // batches since it sorted (−1: no order kept)
};
// Whether a forward of `problem` with its order buffer at `order` sorts:
// no order kept, another problem's, another buffer, or sort_every batches on it.
bool sorts_vocabulary(const VocabularyOrderAge& age, const Problem& problem, const int* order, int64_t sort_every);
// Stage 08's sorted_forward_states with that rule: the vocabulary sorted
// (s08::sort_vocabulary) or the order the buffers hold kept, then
// s08::forward_in_order; `age` follows. Returns the order's age in batches
// (0: sorted now). Stage 11 runs it on each shard.
int forward_states_keeping_order(const DeviceInputs& in, const s08::SortedForwardPlan& plan,
                                 const s08::SortedForwardBuffers& buffers, int64_t sort_every,
                                 VocabularyOrderAge& age, cudaStream_t stream);

// Every kDecideEveryBatches-th batch in a row of dense ones decides again,
// on a sample of its rows (decide_on_sample), so that a batch that turned
// peaked goes back to the sparse plan.
constexpr int kDecideEveryBatches = 16;
// Whether loss_and_gradient runs the dense plan before the forward: --plan
// dense always, sparse never, auto when the last decision kept more than
// kDenseAboveKept and fewer than kDecideEveryBatches − 1 batches ran dense since.
bool dense_before_forward(BackwardPlan flag, const PlanHistory& history);
// Whether this batch decides again on a sample first: auto, after
// kDecideEveryBatches − 1 dense batches since the last decision.
bool decides_on_sample(BackwardPlan flag, const PlanHistory& history);

// The sample: `rows` rows spread over the batch, every `stride`-th from row 0.
// Deciding on the whole batch would cost its forward with the statistics and
// the dense plan after a forward (four GEMMs, where the plan before the
// forward pays three); the sample's forward and decision cost a fraction of
// that: its GEMM is rows / N of the forward's, while the vocabulary's sort
// and gather read all of C as a whole forward's do.
constexpr int64_t kSampleRows = 1024;
struct RowSample {
  int64_t rows = 0, stride = 1;
};
RowSample plan_row_sample(const Problem& problem);  // min(N, kSampleRows) rows, stride N / rows

// ---- batch_plan.cu: the plan's buffers and steps ----
struct BatchPlanBuffers {
  int* token_order = nullptr;  // [N]: token block b holds rows token_order[128b ..]
  int* token_place = nullptr;  // [N]: its inverse
  int* grouping_key = nullptr;  // [N]: the sort's key (group_tokens)
  int* rows_hot = nullptr;      // [tiles]: the rows with a gradient that need each tile
  int* tile_rank = nullptr;     // [tiles]: each tile's place in the order (rows_hot, tile)
  float* regroup_threshold = nullptr;  // [1]: ln of the second grouping's threshold (regroup_near_chosen_eps)
  uint16_t* need_bits = nullptr;  // [tiles/16][N]: which of 16 tiles each row needs, where !need_bits_in_work
  unsigned long long* misplaced_mass = nullptr;  // [candidates + 1]: fixed-point masses, then the rows with a gradient
  int* head_tiles = nullptr;                   // after them: the dense head's length (mark_dense_head)
};
// The grouping's need bits live in s09's work buffer, free between the
// forward and the correction, after the grouping's sort (at every benchmark
// shape); an item of their own only where the buffer is too small for them.
bool need_bits_in_work(const Problem& problem, const DropPlan& plan);
std::vector<MemoryItem> batch_plan_items(const Problem& problem, const DropPlan& plan);
BatchPlanBuffers batch_plan_buffers(const Problem& problem, const Scratch& scratch);
// dC's owners read a k-step's rows of E by TMA where they are consecutive
// (s09::dc_rows_by_tma). With grouped token blocks they are not, so the
// sparse plan with a dC to write copies E's rows into the token order first,
// into the bf16 dE output, free until finish_de writes it; no S tiles spill
// there then (plan_with_rows_in_de): the slots' other places hold the chunks.
// Only where the backward's `kept` pairs take several chunks even with
// those slots, and the slots left hold at least half of them: each chunk
// more ends dE's parts with one more pass over their fp32 sums, which can
// cost dE's owners more than the copy gives dC's (stage 09's WORKLOG).
bool copies_rows_in_token_order(const Problem& problem, const DropPlan& plan, int64_t kept,
                                const s08::TokenBlocks& blocks, const void* de, const void* dc);
bool rows_copy_pays(const DropPlan& plan, int64_t kept);  // its condition on the chunks alone
DropPlan plan_with_rows_in_de(DropPlan plan);
const void* copy_rows_in_token_order(const DeviceInputs& in, const s08::TokenBlocks& blocks, void* de,
                                     cudaStream_t stream);  // returns de
// out[r] = rows[order[r]] for r < count, rows of D elements of the problem's
// dtype: E's rows in the token order above, sorted C's rows of the dense head.
void copy_rows_by_index(const Problem& problem, const void* rows, const int* order, int64_t count, void* out,
                        cudaStream_t stream);
// The grouped token order (after s09::compute_grad_scale), with needs tested
// at ln p ≥ log_threshold.
s08::TokenBlocks group_tokens(const Problem& problem, const DropPlan& plan, const BatchPlanBuffers& buffers,
                              const s09::BackwardBuffers& backward, const float* lse, float log_threshold,
                              cudaStream_t stream);
// What the automatic eps is chosen from: mass[k], the misplaced mass of the
// (token block, tile) pairs whose smallest dropping candidate is
// candidate_eps(k), in fixed point (units of 2^-32), and the rows
// with a gradient. Integers: split the pairs any way (the tiles of several
// GPUs), the masses' sums are the same in any order.
struct MisplacedMass {
  std::array<unsigned long long, kAutoCandidates> mass{};
  unsigned long long rows = 0;
};
// On the stream, into buffers.misplaced_mass: the kAutoCandidates masses, then the
// rows; and into backward.keep, each pair's largest dropping candidate (for
// keep_pairs_at_chosen_eps).
void measure_misplaced_mass(const Problem& problem, const DropPlan& plan, const BatchPlanBuffers& buffers,
                            const s09::BackwardBuffers& backward, const float* lse, const s08::TokenBlocks& blocks,
                            cudaStream_t stream);
// The second grouping: the eps that buffers.misplaced_mass chooses, on the
// device; the rows grouped again with needs tested kRegroupExponents below it
// (into `blocks`' buffers); the masses measured again over the new blocks.
void regroup_near_chosen_eps(const Problem& problem, const DropPlan& plan, const BatchPlanBuffers& buffers,
                             const s09::BackwardBuffers& backward, const float* lse, double budget,
                             s08::TokenBlocks& blocks, cudaStream_t stream);
// The largest candidate eps whose misplaced mass per row is within budget.
EpsChoice choose_drop_eps(const MisplacedMass& measured, double budget);
// The same choice made on the device, with the decision at it, so that the
// decision needs no read-back of its own: one kernel (a block per tile) picks
// the candidate from buffers.misplaced_mass with the host's arithmetic, turns each
// pair's largest dropping candidate in backward.keep (measure_misplaced_mass's)
// into a keep flag (a pair is kept when a row's largest entry reaches eps, stage
// 08's test) and writes backward.kept_counts, without reading the statistics
// again; it also writes the masses into host.read_back for the report. Valid
// after the decision's wait (s09::kept_tiles_from_flags): then chosen() gives
// the EpsChoice the device chose.
struct PendingEps {
  HostSpan<unsigned long long> measured;  // [candidates + 1], as in buffers.misplaced_mass
  double budget = 0.0;
  EpsChoice chosen() const;
};
PendingEps keep_pairs_within_budget(const DropPlan& plan, const s09::BackwardBuffers& backward,
                                    const BatchPlanBuffers& buffers, double budget, HostTables& host,
                                    cudaStream_t stream);

// ---- plan_per_batch.cu: the stage ----
// The backward's settings (the stage's flags).
struct DropSettings {
  float eps = 0.0f;             // a fixed eps (0: every tile kept), unless misplaced_mass > 0
  double misplaced_mass = 0.0;  // > 0: eps chosen per batch within this budget
  bool correct_tail = true, correct_dc = true;
  bool group_tokens = true;   // token blocks of grouped rows (false: rows in their order)
  BackwardPlan plan = BackwardPlan::kAuto;
  int64_t dense_slab_columns = 0;  // the dense plan's slab width (0: plan_dense_slabs's default)
  double dense_head_share = 0.0;   // > 0: the sparse plan's dense head at this share (automatic eps only)
  int64_t dense_chunk_rows = 0;    // the dense plan before the forward: rows per chunk (0: plan_dense_chunks's default)
  int64_t sort_every = kSortEveryBatches;  // the forward sorts the vocabulary every this many batches (sorts_vocabulary)
  // With misplaced_mass > 0: the batch before's automatic eps (0: none); the
  // rows are then grouped once, near it (grouping_log_threshold). Not a flag.
  float last_automatic_eps = 0.0f;
};
// The settings of a batch planned from `history`: with the automatic eps, the
// last decision's eps, for the grouping.
DropSettings planned_from(DropSettings settings, const PlanHistory& history);
// The plan a backward ran, and what it was chosen from.
struct PlanChoice {
  BackwardPlan plan = BackwardPlan::kSparse;
  double kept_fraction = -1.0;  // of the pairs the decision would keep (−1: not decided, a forced dense plan)
  DenseSlabs slabs;             // the dense plan's after a forward
  bool before_forward = false;  // the dense plan before the forward (loss_and_gradient): kept_fraction is the last decision's
  DenseChunks chunks;           // its chunks
  DenseTargetRows target_rows;  // its target rows of dC
  int64_t sample_rows = 0;      // > 0: this batch decided on a sample of that many rows
  int64_t head_tiles = 0;       // the sparse plan's dense head (0: none)
  bool rows_in_token_order = false;  // the sparse plan's dC owners read E's rows from a copy in the token order
};
// What the plan is chosen from: the (token block, tile) pairs the decision
// keeps at the chosen eps, of all. Sums over any split of the tiles.
struct KeptPairs {
  int64_t kept = 0, pairs = 0;
  double fraction() const { return static_cast<double>(kept) / static_cast<double>(pairs); }
};
// auto: dense above kDenseAboveKept of the pairs kept; a forced plan stays.
PlanChoice choose_plan(BackwardPlan flag, const KeptPairs& pairs);
// What a batch that ran the dense plan before the forward reports: all of
// its (token block, tile) pairs kept, in the chunks' count; no eps chosen;
// the plan with the last decision's kept fraction (−1: --plan dense).
struct DenseBeforeForwardReport {
  DropStats stats;
  EpsChoice choice;
  PlanChoice ran;
};
DenseBeforeForwardReport report_dense_before_forward(int64_t pairs, const DenseChunks& chunks,
                                                     const DenseTargetRows& target_rows, BackwardPlan flag,
                                                     const PlanHistory& history, int64_t sample_rows);

// The backward in steps, each a free function (backward_to_accumulator runs
// them in order): begin_backward, then, unless the dense plan is forced,
// decide_kept_pairs (the eps: settings.eps, or the automatic one chosen on
// the device; the decision at it), choose_plan, then run_backward_plan.
struct BatchBackward {
  s09::BackwardBuffers buffers;
  BatchPlanBuffers plan_buffers;
  s09::BackwardChoice choice;  // eps (settings.eps until one is chosen), token blocks, corrections
  EpsChoice eps;               // the decision's (a fixed eps: misplaced_mass −1)
  s09::KeptTiles kept;         // the decision's
  int64_t head_tiles = 0;      // the decision's dense head (0: none)
};
// The test the first grouping makes: 2^-kGroupingExponent, or near the batch
// before's automatic eps (near_eps_log_threshold).
float grouping_log_threshold(const DropSettings& settings);
// The grad scale, and the token blocks (grouped when the settings say so and the dense plan is not forced).
BatchBackward begin_backward(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                             const float* upstream, const DropSettings& settings, cudaStream_t stream);
// Stage 09's decision (into batch.kept, batch.eps, batch.choice.eps) in two
// steps, so that stage 11 can join the measured masses between them:
// measure_for_decision (the automatic eps's masses: measure_misplaced_mass), then
// finish_decision (the eps chosen on the device and the flags at it, or stage
// 08's decision at settings.eps; then s09::kept_tiles_from_flags, which
// corrects the tail into de_acc unless null, and waits once). Returns the
// pairs kept.
void measure_for_decision(const Problem& problem, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          const BatchBackward& batch, HostTables& host, cudaStream_t stream);
// Between the two, with the automatic eps over rows grouped at 2^-12 (regroups:
// no batch before), the rows grouped again near the eps those masses choose
// and the masses measured again (regroup_near_chosen_eps); stage 11 joins both
// measurements.
bool regroups(const DropSettings& settings, const BatchBackward& batch);
void regroup_for_decision(const Problem& problem, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          BatchBackward& batch, cudaStream_t stream);
KeptPairs finish_decision(const DeviceInputs& in, const DropPlan& plan, const float* lse, const DropSettings& settings,
                          BatchBackward& batch, float* de_acc, void* dc, HostTables& host, cudaStream_t stream);
KeptPairs decide_kept_pairs(const DeviceInputs& in, const DropPlan& plan, const float* lse, const DropSettings& settings,
                            BatchBackward& batch, float* de_acc, void* dc, HostTables& host, cudaStream_t stream);
// Stage 09's backward over the kept pairs, or the dense plan (whose slab it
// adds to `scratch`: dense_slab_items); sets chosen.slabs for the dense plan.
// Returns the fp32 dE accumulator.
float* run_backward_plan(const DeviceInputs& in, const DropPlan& plan, Scratch& scratch, const float* lse,
                         const DropSettings& settings, PlanChoice& chosen, const BatchBackward& batch, void* de,
                         void* dc, cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats);

// The whole backward up to the fp32 dE accumulator: the grad scale, the
// plan, then stage 09's backward (s09::backward_to_accumulator says what it
// returns) or the dense plan, whose slab it adds to `scratch` (the memory
// model: dense_slab_items). Either way finish_de (or add_target_terms) ends it.
float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, Scratch& scratch, const float* lse,
                               const float* upstream, const DropSettings& settings, void* de, void* dc,
                               cudaStream_t stream, SideStream& side, HostTables& host, DropStats* stats,
                               EpsChoice* choice = nullptr, PlanChoice* ran = nullptr);
std::vector<MemoryItem> backward_scratch(const Problem& problem, const DropPlan& plan);

// The sample's decision: its rows of E, targets (and per-token upstream)
// gathered, then the forward with the statistics and the decision above on
// them, with nothing recomputed. sample_plan is the stage's plan for
// problem.with_tokens(sample.rows); the scratch holds sample_items (the sample's own, apart
// from the batch's).
std::vector<MemoryItem> sample_items(const Problem& problem, const RowSample& sample, const DropPlan& sample_plan);
// A sample's items named apart from the batch's ("row sample: …"), for a memory model that lists both.
std::vector<MemoryItem> named_apart(const std::vector<MemoryItem>& sample);
KeptPairs decide_on_sample(const DeviceInputs& in, const RowSample& sample, const DropPlan& sample_plan,
                           const Scratch& scratch, const float* upstream, const DropSettings& settings,
                           HostTables& host, cudaStream_t stream);
// Its first step, which stage 11 composes with its joins: the sample's rows
// of E and targets (and per-token upstream) gathered into the scratch, as a
// problem of sample.rows tokens over the whole of in's C; its loss and LSE.
struct SampleInputs {
  DeviceInputs in;                  // borrowed: the rows from the scratch, C from the batch's inputs
  const float* upstream = nullptr;  // per token: the sample's rows; mean, sum: the batch's own
  float *loss = nullptr, *lse = nullptr;
};
SampleInputs gather_sample(const DeviceInputs& in, const RowSample& sample, const Scratch& scratch,
                           const float* upstream, cudaStream_t stream);
// Every sample.stride-th row of `row_bytes` from src, sample.rows of them, packed into dst.
void gather_sample_rows(void* dst, const void* src, size_t row_bytes, const RowSample& sample, cudaStream_t stream);

// The report's words on a backward's choices: the eps ("eps 2^-12.5" for a half
// candidate, else stage 08's words), the automatic eps's rule (appended to the
// eps), the candidates' masses (a line), the plan and why (a line;
// `decides_again`: how a dense run's every kDecideEveryBatches-th batch decides).
std::string describe_eps(float eps);
std::string describe_automatic_eps(const EpsChoice& choice, double budget);
std::string describe_candidates(const EpsChoice& choice);
std::string describe_plan(const PlanChoice& ran, BackwardPlan flag, const std::string& decides_again = "on a sample");
// What the dense plan's gradient leaves out: nothing beyond the arithmetic,
// but for the chunks of q (bf16 before the forward) the rows α_i·E_i rounded to bf16 in dC's product.
GradientApproximation dense_plan_approximation(const PlanChoice& ran);

class PlanPerBatchStage : public s09::DeterministicProductsStage {
 public:
  std::string name() const override { return "10_plan_per_batch"; }
  std::string summary() const override {
    return "stage 09 planned per batch: eps from the misplaced mass, token blocks of grouped rows";
  }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void release_workspace() override { release_scratch(), sample_scratch_.release(); }
  // Stage 09's forward, sorted C in the work buffer (forward_into_dc puts it in dC's output),
  // the vocabulary sorted when sorts_vocabulary says so.
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  // The dense plan before the forward when dense_before_forward says so; else
  // forward_into_dc() and backward().
  void loss_and_gradient(const DeviceInputs& in, float* loss, float* lse, const float* upstream, void* de, void* dc,
                         cudaStream_t stream) override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;
  std::vector<std::string> report_lines() const override;

  EpsChoice eps_choice() const { return choice_; }  // of the last backward
  std::vector<int> token_order() const;             // of the last backward's token blocks (for the tests)
  bool automatic_eps(Dtype dtype) const { return dtype == Dtype::kBFloat16 && !keep_all_ && eps_flag_ == 0.0; }
  // The flags as the backward's settings.
  DropSettings settings(Dtype dtype) const {
    return {drop_eps(dtype), automatic_eps(dtype) ? misplaced_mass_budget() : 0.0, !no_correction_, !no_dc_correction_,
            !no_grouping_, parse_backward_plan(plan_flag_), slab_columns_flag_, head_share_flag_, chunk_rows_flag_,
            sort_every_flag_};
  }
  PlanChoice plan_choice() const { return ran_; }  // of the last backward
  const std::string& plan_flag() const { return plan_flag_; }
  void fix_plan(BackwardPlan plan) { plan_flag_ = to_string(plan); }  // in place of --plan
  // The dense plan's backward is exact; the sparse one leaves out what stage 09's does.
  GradientApproximation gradient_approximation() const override;
  // A fixed eps in place of the automatic one (what --drop-eps sets).
  void fix_drop_eps(float eps) { eps_flag_ = eps, keep_all_ = eps <= 0.0f; }
  double misplaced_mass_budget() const { return mass_flag_ > 0.0 ? mass_flag_ : kDefaultMisplacedMass; }
  bool misplaced_mass_flag_set() const { return mass_flag_ > 0.0; }

 private:
  // forward() with all of sorted C gathered into dC's output (V × D, which
  // nothing writes before the backward): one forward kernel instead of one per
  // chunk of the work buffer. As forward() where dc cannot take it.
  void forward_into_dc(const DeviceInputs& in, void* dc, float* loss, float* lse, cudaStream_t stream);
  // The scratch released, and with it the vocabulary order it kept.
  void release_scratch() { scratch_.release(), order_age_ = {}; }
  // Stage 08's sorted forward into these buffers, the vocabulary's order kept or sorted (forward_states_keeping_order).
  void sorted_forward(const DeviceInputs& in, const s08::SortedForwardPlan& plan,
                      const s08::SortedForwardBuffers& buffers, float* loss, float* lse, cudaStream_t stream);

  double mass_flag_ = 0.0;  // --misplaced-mass; 0 = kDefaultMisplacedMass
  bool no_grouping_ = false;
  std::string plan_flag_ = "auto";  // --plan
  int64_t slab_columns_flag_ = 0;    // --dense-slab-columns
  int64_t chunk_rows_flag_ = 0;      // --dense-chunk-rows
  int64_t sort_every_flag_ = kSortEveryBatches;  // --sort-every
  double head_share_flag_ = 0.0;     // --dense-head
  EpsChoice choice_;
  PlanChoice ran_;
  float grouped_near_eps_ = 0.0f;  // the last backward's: the batch before's eps its rows were grouped near (0: none)
  bool sorted_c_in_dc_ = false;  // the last forward's sorted C was in dC's output
  VocabularyOrderAge order_age_;  // of the order in the scratch
  int order_batches_ = -1;        // the last forward's: batches since its order was sorted (−1: no sorted forward)
  PlanHistory history_;
  Problem history_problem_;  // the problem history_ is of (another one starts a new history)
  Scratch sample_scratch_;   // the sample's decision's (sample_items)
  DenseReadBacks dense_read_backs_;
  // forward_into_dc's plan over the whole vocabulary in one chunk (its range balancing
  // costs microseconds before the first kernel): the last question and answer.
  LastAnswer<Problem, s08::SortedForwardPlan> whole_plan_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s10
