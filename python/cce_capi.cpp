// The stages behind a C interface, for python/cce_stages (ctypes): a caller
// hands device pointers (a PyTorch tensor's data_ptr) and a stream; the stage
// runs on them in place, exactly as its executable does on uploaded inputs.
//
// Why a C interface and ctypes: nothing here is compiled against PyTorch, so
// a machine without it builds everything, any PyTorch version loads the same
// library, and the op's Python side (torch.library.custom_op, its fake and
// its autograd) is plain Python. Errors come back as a status and one line.
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/options.h"
#include "common/stage.h"
#include "common/stage_table.h"
#include "stages/07_filter_sort/filter_sort.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"
#include "python/capi_kernels.h"


namespace {

using namespace cce;

constexpr int kOk = 0, kFailed = 1, kBadInput = 2;

int fail(int status, const std::string& what, char* error, int error_len) {
  if (error != nullptr && error_len > 0) {
    std::strncpy(error, what.c_str(), static_cast<size_t>(error_len) - 1);
    error[error_len - 1] = '\0';
  }
  return status;
}

template <class Body>
int guarded(char* error, int error_len, Body&& body) {
  try {
    body();
    return kOk;
  } catch (const InputError& e) {
    return fail(kBadInput, e.what(), error, error_len);
  } catch (const std::exception& e) {
    return fail(kFailed, e.what(), error, error_len);
  }
}

// A stage of the table, the checked copy of the targets it runs on, what
// the check leaves for the host and the LSE of callers that do not want it,
// kept between calls (one allocation from the caller's allocator per size,
// not per call). A handle runs on one device.
struct StageHandle {
  std::unique_ptr<Stage> stage;
  DeviceBuffer<int64_t> safe_targets;
  TargetCheckSlots target_check;
  DeviceBuffer<float> unwanted_lse;
};

// The calls on one device take turns. Callers may be threads, each on a
// stream of its own, and every stage on a device shares that device's cuBLAS
// handle and workspace (common/cublas_handle.cpp): so one call at a time per
// device on the host, and a call on another stream than the one before it
// waits on the GPU for that call's work (an event recorded after each call).
struct DeviceTurns {
  std::mutex mutex;
  bool called = false;
  cudaStream_t last = nullptr;
  cudaEvent_t done = nullptr;
};
DeviceTurns g_turns[kMaxDevices];

template <class Body>
void on_device_turn(cudaStream_t stream, Body&& body) {
  DeviceTurns& turns = g_turns[current_device_index()];
  const std::lock_guard<std::mutex> lock(turns.mutex);
  if (turns.done == nullptr) CCE_CUDA_CHECK(cudaEventCreateWithFlags(&turns.done, cudaEventDisableTiming));
  if (turns.called && turns.last != stream) CCE_CUDA_CHECK(cudaStreamWaitEvent(stream, turns.done, 0));
  turns.called = true, turns.last = stream;
  try {
    body();
  } catch (...) {  // work may be queued (a bad target is found after the stage's): the next call still waits for it
    cudaEventRecord(turns.done, stream);
    throw;
  }
  CCE_CUDA_CHECK(cudaEventRecord(turns.done, stream));
}

}  // namespace

extern "C" {

// The problem as the caller states it (dtype: 0 fp32, 1 bf16; reduction: 0 mean, 1 sum, 2 none).
struct CceProblem {
  int64_t n, d, v;
  int32_t dtype, reduction;
  float softcap;  // 0: off
  int64_t ignore_index;
};

// The stage table's names, comma-separated, and whether each has a backward ("name:1").
int cce_stage_names(char* out, int out_len) {
  std::string names;
  for (StageFactory factory : all_stages()) {
    const std::unique_ptr<Stage> stage = factory();
    names += (names.empty() ? "" : ",") + stage->name() + (stage->has_backward() ? ":1" : ":0");
  }
  if (static_cast<int>(names.size()) >= out_len) return kFailed;
  std::memcpy(out, names.c_str(), names.size() + 1);
  return kOk;
}

// A stage of the table by name, with its flags as on its command line ("--plan sparse").
void* cce_stage_new(const char* name, const char* flags, char* error, int error_len) {
  StageHandle* made = nullptr;
  const int status = guarded(error, error_len, [&] {
    for (StageFactory factory : all_stages()) {
      std::unique_ptr<Stage> stage = factory();
      if (stage->name() != name) continue;
      std::vector<std::string> words = {stage->name()};
      std::string word;
      for (const char* p = flags; p != nullptr && *p != '\0'; ++p) {
        if (*p == ' ') {
          if (!word.empty()) words.push_back(word), word.clear();
        } else {
          word += *p;
        }
      }
      if (!word.empty()) words.push_back(word);
      std::vector<char*> argv;
      for (std::string& w : words) argv.push_back(w.data());
      OptionParser parser(stage->name());
      stage->add_options(parser);
      if (!parser.parse(static_cast<int>(argv.size()), argv.data())) throw InputError("--help is not a stage flag here");
      stage->validate_options();
      made = new StageHandle{std::move(stage), {}, {}, {}};
      return;
    }
    throw InputError(std::string("no stage named '") + name + "'");
  });
  return status == kOk ? made : nullptr;
}

void cce_stage_delete(void* stage) { delete static_cast<StageHandle*>(stage); }

// Every device buffer (the stages' scratch, cuBLAS's workspace) from the
// caller's allocator; only before the first stage runs. detach: at the
// caller's exit, releases become no-ops (its allocator is gone).
int cce_set_allocator(AllocationTracker::AllocateFn allocate, AllocationTracker::ReleaseFn release, char* error,
                      int error_len) {
  return guarded(error, error_len, [&] { AllocationTracker::set_source(allocate, release); });
}
void cce_detach_allocator() { AllocationTracker::detach_source(); }

// Loss and LSE; with de, also the gradient for this upstream gradient ([1]
// for mean and sum, [N] for none), in one Stage::loss_and_gradient.
// Every pointer is the caller's device memory, used in place. A target that
// is neither ignore_index nor in [0, V) is bad input (status 2). lse NULL: the
// caller does not want it (the handle keeps one for the stage). dc NULL: the
// caller wants no dC (a frozen classifier). Stages 09 and 10 then skip dC's
// work (Stage::skips_null_dc); the others write dC as they go, into a buffer
// from the caller's allocator released when the call returns.
int cce_run(void* stage_handle, const CceProblem* problem, const void* e, const void* c, const int64_t* targets,
            const float* upstream, float* loss, float* lse, void* de, void* dc, void* stream, char* error,
            int error_len) {
  return guarded(error, error_len, [&] {
    on_device_turn(static_cast<cudaStream_t>(stream), [&] {
      StageHandle& handle = *static_cast<StageHandle*>(stage_handle);
      Stage& stage = *handle.stage;
      Problem p;
      p.n = problem->n, p.d = problem->d, p.v = problem->v;
      if (problem->dtype != 0 && problem->dtype != 1) throw InputError("dtype must be 0 (fp32) or 1 (bf16)");
      if (problem->reduction < 0 || problem->reduction > 2) throw InputError("reduction must be 0, 1 or 2");
      p.dtype = problem->dtype == 1 ? Dtype::kBFloat16 : Dtype::kFloat32;
      p.reduction = static_cast<Reduction>(problem->reduction);
      p.softcap = problem->softcap;
      p.ignore_index = problem->ignore_index;
      p.validate();
      const bool backward = de != nullptr;
      if (dc != nullptr && de == nullptr) throw InputError("dC without dE: pass dE too");
      if (backward && upstream == nullptr) throw InputError("a gradient needs the upstream gradient");
      if (backward && !stage.has_backward()) throw InputError("stage " + stage.name() + " has no backward");
      const auto s = static_cast<cudaStream_t>(stream);
      // The stage runs on a checked copy of the targets, queued before the host
      // waits for the check: the GPU never idles for it. A bad target refuses
      // the call after the stage's work is queued (its outputs are discarded).
      if (handle.safe_targets.size() < static_cast<size_t>(p.n)) handle.safe_targets = DeviceBuffer<int64_t>(p.n);
      int64_t* safe_targets = handle.safe_targets.get();
      const TargetCheck check = start_target_check(targets, p.n, p.v, p.ignore_index, safe_targets, handle.target_check, s);
      const DeviceInputs in = DeviceInputs::borrow(p, e, c, safe_targets);
      if (lse == nullptr) {
        if (handle.unwanted_lse.size() < static_cast<size_t>(p.n)) handle.unwanted_lse = DeviceBuffer<float>(p.n);
        lse = handle.unwanted_lse.get();
      }
      DeviceBuffer<uint8_t> unwanted_dc;  // for stages that write dC whatever the caller wants
      if (backward && dc == nullptr && !stage.skips_null_dc()) {
        unwanted_dc = DeviceBuffer<uint8_t>(static_cast<size_t>(p.v * p.d) * p.element_bytes());
        dc = unwanted_dc.get();
      }
      if (backward) {
        stage.loss_and_gradient(in, loss, lse, upstream, de, dc, s);  // stage 10 may plan the two together
      } else {
        stage.expect_backward(false);
        stage.forward(in, loss, lse, s);
      }
      finish_target_check(check);
    });
  });
}

// de [de_count] and dc [dc_count] (dtype 0 fp32, 1 bf16; dc NULL: none) *= g,
// g one float on the device: the op's backward scales the gradient made for
// an upstream gradient of 1 by autograd's, in place, with no pass over them
// when g is 1. One call and one launch for both: the backward's host path is short.
int cce_scale(void* de, int64_t de_count, void* dc, int64_t dc_count, int32_t dtype, const float* g, void* stream,
              char* error, int error_len) {
  return guarded(error, error_len, [&] {
    if (dtype != 0 && dtype != 1) throw InputError("dtype must be 0 (fp32) or 1 (bf16)");
    const Dtype type = dtype == 1 ? Dtype::kBFloat16 : Dtype::kFloat32;
    const auto s = static_cast<cudaStream_t>(stream);
    scale_in_place(de, de_count, dc, dc_count, type, g, s);  // the caller's outputs only: no turn to take
  });
}

// What the last backward of a stage left out, for the stages that drop or
// filter (07 to 10); the others report has_stats 0. Typed, so that a caller
// reads fields rather than parsing report lines.
struct CceStats {
  int32_t has_stats;              // 0: the stage keeps none, or has run no backward yet
  int32_t plan;                   // stage 10: the backward that ran, 0 sparse, 1 dense; -1 for the others
  int64_t units, kept_units;      // (token block, tile) pairs (stage 07: tiles) and those whose products ran
  double decided_kept_fraction;   // stage 10: the share of pairs its decision keeps, which chose the plan; -1 unknown
  double eps;                     // the eps the backward dropped below (0: every pair kept)
  double misplaced_mass;          // stage 10's automatic eps: the softmax mass per row it misplaced; -1 otherwise
};

// Stage 07 counts its kept tiles on the GPU: reading them waits for `stream`.
int cce_last_stats(void* stage_handle, void* stream, CceStats* out, char* error, int error_len) {
  return guarded(error, error_len, [&] {
    on_device_turn(static_cast<cudaStream_t>(stream), [&] {
      const Stage* stage = static_cast<const StageHandle*>(stage_handle)->stage.get();
      CceStats st{0, -1, 0, 0, -1.0, 0.0, -1.0};
      if (const auto* plan = dynamic_cast<const s10::PlanPerBatchStage*>(stage)) {
        const s09::DropStats d = plan->stats();
        const s10::PlanChoice ran = plan->plan_choice();
        const s10::EpsChoice choice = plan->eps_choice();
        st = {d.tiles > 0 ? 1 : 0, ran.plan == s10::BackwardPlan::kDense ? 1 : 0, d.tiles, d.kept_tiles,
              ran.kept_fraction, d.eps, choice.misplaced_mass};
      } else if (const auto* det = dynamic_cast<const s09::DeterministicProductsStage*>(stage)) {
        const s09::DropStats d = det->stats();
        st = {d.tiles > 0 ? 1 : 0, -1, d.tiles, d.kept_tiles, -1.0, d.eps, -1.0};
      } else if (const auto* drop = dynamic_cast<const s08::DropBeforeRecomputeStage*>(stage)) {
        const s08::DropStats d = drop->stats();
        st = {d.pairs > 0 ? 1 : 0, -1, d.pairs, d.kept_pairs, -1.0, d.eps, -1.0};
      } else if (const auto* filter = dynamic_cast<const s07::FilterSortStage*>(stage)) {
        CCE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
        const s07::FilterStats f = filter->stats();
        st = {f.tiles > 0 ? 1 : 0, -1, f.tiles, f.kept_tiles, -1.0, filter->gradient_approximation().eps, -1.0};
      }
      *out = st;
    });
  });
}

}  // extern "C"
