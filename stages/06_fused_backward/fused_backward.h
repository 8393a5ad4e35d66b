// Stage 06: the fused backward. dE and dC from recomputed logits tiles.
// Uses: stage 05's forward (loss and LSE, no logits kept); common/tile (the
// block-level tile products, the unit order); common/token_reduction.
//
// The backward runs one kernel with a thread block per (token block ×
// vocabulary tile), in stage 05's grouped order: each block recomputes its
// logits tile on tensor cores, turns it into
//   S_ij = g_i · (exp(z_ij − LSE_i) − [j = t_i]) · softcap'(z_ij)
// (0 for ignored tokens and past N or V) in shared memory (backward_tile.cuh),
// and adds
//   dE[token block] += S · C[vocabulary tile],  dC[vocabulary tile] += Sᵀ · E[token block]
// into fp32 accumulators with atomics, D in chunks of 64
// (backward_products.cuh). A last kernel casts the accumulators to the input
// dtype (for fp32 inputs the outputs are the accumulators themselves).
#pragma once

#include <memory>

#include "common/stage.h"
#include "common/tile/tile_path.h"

namespace cce::s06 {

// The block-level path and the one-tile units of the backward kernels.
struct BackwardPlan {
  TilePath path;
  TileUnits units;
};
BackwardPlan plan_backward(const Problem& problem);

// fp32 accumulators for bf16 inputs, and the per-token grad scale.
std::vector<MemoryItem> backward_scratch(const Problem& problem);
struct Accumulators {
  float* de;  // [N,D] fp32: the scratch item, or the dE output itself for fp32
  float* dc;  // [V,D]
  const float* grad_scale;  // [N]
};
// Zeroes the accumulators and computes g_i from the upstream gradient.
Accumulators prepare_backward(const DeviceInputs& in, const float* upstream, const Scratch& scratch, void* de,
                              void* dc, cudaStream_t stream);
// fp32 [count] rounded into bf16 [count] (dst: __nv_bfloat16).
void cast_to_bf16(const float* src, void* dst, int64_t count, cudaStream_t stream);
// Casts the accumulators into dE and dC (bf16); nothing for fp32.
void finish_backward(const DeviceInputs& in, const Accumulators& acc, void* de, void* dc, cudaStream_t stream);

// Report lines: the forward's grid (stage 05) and the backward's.
std::vector<std::string> report_backward_plan(const Problem& problem);

// This stage's backward: the kernel over every tile, then the cast.
void backward(const DeviceInputs& in, Scratch& scratch, const float* lse, const float* upstream, void* de, void* dc,
              cudaStream_t stream);

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s06
