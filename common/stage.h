// The interface every stage implements, so that the stage executables, the
// tests, the tour and the benchmarks all loop over one table of stages.
//
// Device data layout (row-major throughout):
//   E [N,D] and C [V,D] in the problem's dtype (fp32, or bf16 as __nv_bfloat16),
//   targets [N] int64, loss [1] (mean, sum) or [N] (none), LSE [N] fp32,
//   upstream gradient [1] (mean, sum) or [N] (none) fp32,
//   dE [N,D] and dC [V,D] in the problem's dtype.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/device_buffer.h"
#include "common/error_bound.h"
#include "common/host_data.h"
#include "common/options.h"
#include "common/problem.h"
#include "common/scratch.h"

namespace cce {

// Values in a problem's dtype on the current device: fp32 as they are, bf16
// rounded to nearest even (float_to_bf16_bits); and such a buffer back as floats.
DeviceBuffer<uint8_t> upload_values(const float* values, size_t count, Dtype dtype);
std::vector<float> download_values(const DeviceBuffer<uint8_t>& buffer, Dtype dtype);

// Inputs on the device, owned (and counted by the allocation tracker).
struct DeviceInputs {
  Problem problem;
  DeviceBuffer<uint8_t> e;  // [N,D] dtype
  DeviceBuffer<uint8_t> c;  // [V,D] dtype
  DeviceBuffer<int64_t> targets;

  static DeviceInputs upload(const Problem& problem, const HostInputs& inputs);
  // The caller's device memory, borrowed (not copied, not freed): E [N,D] and
  // C [V,D] in the problem's dtype, targets [N] int64 (python/: PyTorch's tensors).
  static DeviceInputs borrow(const Problem& problem, const void* e, const void* c, const int64_t* targets);
  size_t bytes() const { return e.bytes() + c.bytes() + targets.bytes(); }
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string name() const = 0;     // "01_materialized"
  virtual std::string summary() const = 0;  // what is new, one line
  virtual bool has_backward() const = 0;

  // The device memory the stage itself allocates for this problem (its
  // scratch, beyond inputs and the caller's outputs), item by item. Exact: the
  // drivers compare it with the allocation tracker.
  virtual std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const = 0;

  // loss: [1] or [N]; lse: [N]. Outputs must be written completely.
  virtual void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) = 0;
  // Tells the stage whether a backward() will follow the next forward(), as
  // autograd knows whether the loss requires a gradient: a stage that keeps
  // forward state for its backward (stage 08's tile statistics) keeps it only
  // then. The drivers call it before every forward; the default ignores it.
  virtual void expect_backward(bool) {}
  // Needs the LSE of forward(); writes dE and dC completely. dc may be null
  // when skips_null_dc() (a frozen classifier: dC's work is skipped).
  virtual void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                        cudaStream_t stream) = 0;
  virtual bool skips_null_dc() const { return false; }
  // Loss and gradient in one call, for a caller that has the upstream
  // gradient before the forward (the drivers, the benchmarks): the default
  // is expect_backward(true), forward(), backward(). A stage may plan the
  // two together (stage 10's dense plan computes the gradient with the loss).
  virtual void loss_and_gradient(const DeviceInputs& in, float* loss, float* lse, const float* upstream, void* de,
                                 void* dc, cudaStream_t stream);

  // Stage-specific flags and report lines (e.g. stage 07's filtering).
  virtual void add_options(OptionParser&) {}
  // Throws InputError for bad stage flags; called right after parsing, so
  // that bad input is refused before any GPU work.
  virtual void validate_options() const {}
  virtual std::vector<std::string> report_lines() const { return {}; }
  // What the last backward left out of the gradient on purpose, which the
  // checks against the reference allow beyond the arithmetic
  // (common/error_bound.h): nothing for an exact stage; stage 07's filter and
  // stage 08's dropped tiles leave out terms below their eps.
  virtual GradientApproximation gradient_approximation() const { return {}; }
  // Whether two runs on the same inputs give bitwise identical outputs (no
  // atomics or locks in any sum); `backward`: for loss + gradient runs.
  virtual bool bitwise_reproducible(bool backward) const {
    (void)backward;
    return false;
  }
  // Releases scratch kept between calls (e.g. stage 01's logits).
  virtual void release_workspace() { scratch_.release(); }

 protected:
  // The stage's scratch, allocated from the items its workspace() reports.
  Scratch scratch_;
};

// A stage that computes the loss and LSE only: the drivers refuse --backward
// for it, and backward() is never reached (it throws if it is).
class ForwardOnlyStage : public Stage {
 public:
  bool has_backward() const final { return false; }
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) final;
};

using StageFactory = std::unique_ptr<Stage> (*)();

// Most stages are a few free functions; this makes a Stage of them, so that
// a stage folder holds its kernels and functions, not interface plumbing.
// Stages with flags of their own derive from Stage (or ForwardOnlyStage).
struct StageParts {
  std::string name;     // "01_materialized"
  std::string summary;  // what is new, one line
  std::function<std::vector<MemoryItem>(const Problem& problem, bool backward)> workspace;
  std::function<void(const DeviceInputs& in, Scratch& scratch, float* loss, float* lse, cudaStream_t stream)> forward;
  // Empty for a forward-only stage.
  std::function<void(const DeviceInputs& in, Scratch& scratch, const float* lse, const float* upstream, void* de,
                     void* dc, cudaStream_t stream)>
      backward = nullptr;
  // Report lines for a problem the stage has run (optional).
  std::function<std::vector<std::string>(const Problem& problem)> report = nullptr;
};
std::unique_ptr<Stage> make_stage_from(const StageParts& parts);

// Bytes of the caller-owned outputs: loss, LSE, upstream, and dE + dC with backward.
std::vector<MemoryItem> output_memory(const Problem& problem, bool backward);
size_t total_bytes(const std::vector<MemoryItem>& items);
size_t input_bytes(const Problem& problem);

}  // namespace cce
