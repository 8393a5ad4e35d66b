// Stage 06: the fused backward. dE and dC from recomputed logits tiles.
//
// The forward is stage 05's (loss and LSE, no logits kept). The backward runs
// one kernel on the same 2D grid (token blocks × vocabulary blocks, grouped
// launch order): each thread block recomputes its logits tile on tensor cores
// (stage 03's tile product), turns it into
//   S_ij = g_i · (exp(z_ij − LSE_i) − [j = t_i]) · softcap'(z_ij)
// (0 for ignored tokens and past N or V), keeps S in shared memory, and adds
//   dE[token block] += S · C[vocabulary block],  dC[vocabulary block] += Sᵀ · E[token block]
// into fp32 accumulation buffers with atomics, D in chunks of 64. A last
// kernel casts the buffers to the input dtype (for fp32 inputs the outputs
// are the accumulation buffers themselves).
//
// Stage 07 reuses this kernel with filtering (a tile whose every |S| is
// below eps skips the two products) and a sorted vocabulary.
#pragma once

#include <memory>

#include "common/stage.h"
#include "stages/05_lse_locks/lse_locks.h"

namespace cce::s06 {

struct BackwardOptions {
  // Stage 07: skip a tile's two products when every |(p − onehot)·softcap'|
  // in it is below filter_eps (the gradient before the upstream scale g_i).
  float filter_eps = 0.0f;  // 0: no filtering
  // Stage 07: tile position p holds vocabulary entry vocab_order[p]. Null: natural order.
  const int* vocab_order = nullptr;
};

struct BackwardStats {
  int64_t tiles = 0, kept_tiles = 0;
};

// Scratch the backward needs for a problem: fp32 accumulators for bf16
// inputs, the per-token grad scale, the kept-tile counter.
std::vector<MemoryItem> backward_workspace(const Problem& problem);

class FusedBackwardRunner {
 public:
  // Runs the backward: dE, dC in the problem's dtype. Returns nothing; stats
  // are read with stats() after the stream is synchronized.
  void run(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
           const BackwardOptions& options, cudaStream_t stream);
  BackwardStats stats() const;
  void release();

 private:
  DeviceBuffer<float> de_acc_, dc_acc_, grad_scale_;
  DeviceBuffer<unsigned long long> kept_;
  int64_t tiles_ = 0;
};

class FusedBackwardStage : public Stage {
 public:
  std::string name() const override { return "06_fused_backward"; }
  std::string summary() const override { return "fused backward: dE and dC from recomputed logits tiles"; }
  bool has_backward() const override { return true; }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  std::vector<std::string> report_lines() const override;
  void release_workspace() override;

 private:
  s05::LseLocksStage forward_stage_;
  FusedBackwardRunner backward_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s06
