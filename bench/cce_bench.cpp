// cce_bench: every stage of the stage table against the cuBLAS floor, in one
// Google Benchmark binary (see bench/README.md for the counters and the rules).
//
// Benchmarks are named <impl>/<mode>/<shape>:
//   impl  = stageNN_name (every stage of all_stages()) or cublas_floor,
//   mode  = loss (forward) or loss_grad (forward + backward; stages with a backward only),
//   shape = small | gpt2 | llama3 | gemma2 (generated: bf16, realistic data, mean reduction, seed 1234)
//           | gemma2_flat (gemma2's N, D, V on flat random data, GeneratorOptions DataMode::kRandom:
//             the softmax of an untrained model; otherwise as gemma2)
//           | gemma2_softcap (gemma2 with Gemma-2's softcap, z = 30·tanh(logit/30))
//           | lm32k | lm128k | lm128k_s0 | lm128k_s30 | lm128k_s100 | lm128k_s300 (trained-model data
//             read from --lm-data=DIR/<shape>/{e,c,targets}.npy, written by bench/lm_data.py: lm128k is
//             its final model, lm128k_sK the same model after K training steps, s0 untrained, all
//             written by one `lm_data.py --only lm128k`; run by default when their files are there).
// Google Benchmark appends /iterations:1/repeats:K/manual_time to the names it
// reports; bench/results_table.py keeps the first three components.
//
// Each case is set up once (inputs uploaded, the runs that measure it,
// warm-up) and kept across its repetitions; the next case frees it first. A
// repetition is one call timed by CUDA events (manual time), K = 50 of them
// in a row; the JSON keeps their median, min, max, mean and stddev: the
// statistics of single calls, as bench/peers.py reports them.
//
// Usage: cce_bench [--shapes=small,gpt2,llama3,gemma2,gemma2_flat,gemma2_softcap,lm32k,lm128k,...] [--calls=K]
//                  [--lm-data=DIR]
//                  [Google Benchmark flags: --benchmark_filter=REGEX --benchmark_out=FILE
//                   --benchmark_out_format=json ...]
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/device_buffer.h"
#include "common/driver.h"
#include "common/host_data.h"
#include "common/npy.h"
#include "common/runner.h"
#include "common/stage_table.h"
#include "common/tile/tile_path.h"
#include "common/timer.h"
#include "stages/07_filter_sort/filter_sort.h"
#include "stages/08_drop_before_recompute/drop_before_recompute.h"
#include "stages/09_deterministic_products/deterministic_products.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

#ifndef CCE_SOURCE_DIR
#define CCE_SOURCE_DIR ""
#endif

namespace {

using namespace cce;

// --- Shapes and cases ---------------------------------------------------------

struct Shape {
  std::string name;
  int64_t n = 0, d = 0, v = 0;
  std::string files;  // trained-model shapes: the directory of e.npy, c.npy, targets.npy; empty: generated
  DataMode data = DataMode::kRealistic;  // generated shapes: the generator's mode (common/host_data.h)
  float softcap = 0.0f;                  // s of z = s·tanh(logit/s); 0: none
};

struct GeneratedShape {
  const char* name;
  int64_t n, d, v;
  DataMode data;
  float softcap = 0.0f;
};

// small fits a 16 GB GPU for every stage, stage 01's fp32 logits [N,V] included.
// gemma2_flat: gemma2's problem on flat random data (E ~ N(0,1), C ~ N(0,1/D): every logit ~N(0,1)),
// the softmax of an untrained model, where little can be dropped (drop_eps_sweep calls it gemma2_random).
// gemma2_softcap: gemma2 with the softcap Gemma-2 itself applies to its final logits (30).
constexpr GeneratedShape kGeneratedShapes[] = {
    {"small", 4096, 2304, 32000, DataMode::kRealistic},
    {"gpt2", 20480, 768, 50257, DataMode::kRealistic},
    {"llama3", 8192, 4096, 128256, DataMode::kRealistic},
    {"gemma2", 8192, 2304, 256000, DataMode::kRealistic},
    {"gemma2_flat", 8192, 2304, 256000, DataMode::kRandom},
    {"gemma2_softcap", 8192, 2304, 256000, DataMode::kRealistic, 30.0f},
};
// Trained-model data (bench/lm_data.py): N, D and V come from the files. `dataset` is the
// lm_data.py dataset that writes the shape (--only): lm128k's snapshots during its training
// (lm128k_sK: the model after K steps) come with it.
struct LmShape {
  const char* name;
  const char* dataset;
};
constexpr LmShape kLmShapes[] = {
    {"lm32k", "lm32k"},
    {"lm128k", "lm128k"},
    {"lm128k_s0", "lm128k"},
    {"lm128k_s30", "lm128k"},
    {"lm128k_s100", "lm128k"},
    {"lm128k_s300", "lm128k"},
};
constexpr const char* kDefaultLmData = "/tmp/cce-lm-data";

constexpr uint64_t kSeed = 1234;
// Timed calls per case, each its own repetition of one iteration (--calls).
constexpr int kDefaultCalls = 50;
// The spread of the calls, reported beside the median (min and max aggregates).
double fastest(const std::vector<double>& values) { return *std::min_element(values.begin(), values.end()); }
double slowest(const std::vector<double>& values) { return *std::max_element(values.begin(), values.end()); }
constexpr int kWarmupRuns = 2;  // untimed, after the runs that measure a case (a stage's two, a floor's one)

enum class Mode { kLoss, kLossGrad };
const char* to_string(Mode mode) { return mode == Mode::kLoss ? "loss" : "loss_grad"; }

Problem make_problem(const Shape& shape, Dtype dtype) {
  Problem p;
  p.n = shape.n;
  p.d = shape.d;
  p.v = shape.v;
  p.dtype = dtype;
  p.reduction = Reduction::kMean;
  p.softcap = shape.softcap;
  return p;
}

// The stage number, from the name ("06_..." -> 6); -1 when the name has none.
int stage_number(const std::string& name) {
  if (name.size() < 2 || name[0] < '0' || name[0] > '9' || name[1] < '0' || name[1] > '9') return -1;
  return (name[0] - '0') * 10 + (name[1] - '0');
}

// GEMM flops a case really does (bench/README.md, "Flop counting"):
//   loss: the logits, 2·N·D·V;
//   loss_grad: logits, dE = dlogit·C and dC = dlogitᵀ·E, 6·N·D·V, for stages that keep the
//   logits (01-05); stages from 06 on recompute the logits in the backward: 8·N·D·V.
//   The floor's loss_grad does the four products: 8·N·D·V.
double gemm_flops(const Problem& p, Mode mode, int stage) {
  const double ndv = static_cast<double>(p.n) * static_cast<double>(p.d) * static_cast<double>(p.v);
  if (mode == Mode::kLoss) return 2.0 * ndv;
  const bool recompute = stage < 0 || stage >= 6;  // stage < 0: the floor
  return (recompute ? 8.0 : 6.0) * ndv;
}

struct CaseSpec {
  std::string name;       // <impl>/<mode>/<shape>
  Shape shape;
  Mode mode;
  StageFactory factory;   // nullptr: the cuBLAS floor
  std::string floor_key;  // <mode>/<shape>
};

// --- Host data of one shape, kept while that shape's cases run -----------------

struct Reference {  // stage 01 in fp32 on the same (bf16-rounded) inputs
  bool available = false;
  std::string why_not;
  float loss = 0.0f;
  std::vector<float> de, dc;
};

struct ShapeData {
  std::string name;
  Problem problem;  // bf16
  HostInputs inputs;
  std::vector<float> upstream;
  bool reference_tried = false;
  Reference reference;
};

std::unique_ptr<ShapeData> g_shape;

ShapeData& shape_data(const Shape& shape) {
  if (g_shape && g_shape->name == shape.name) return *g_shape;
  g_shape.reset();  // one shape's host data at a time (gemma2: ~2.4 GB of fp32 inputs)
  auto sd = std::make_unique<ShapeData>();
  sd->name = shape.name;
  sd->problem = make_problem(shape, Dtype::kBFloat16);
  if (!shape.files.empty()) {
    // The stages' --load path: N, D, V from the files, E and C rounded to bf16 (they already are).
    sd->inputs = load_inputs(shape.files, sd->problem);
  } else {
    GeneratorOptions gen;  // realistic data, or the shape's mode (gemma2_flat: random)
    gen.mode = shape.data;
    gen.seed = kSeed;
    sd->inputs = generate_inputs(sd->problem, gen);  // bf16 problem: E and C come rounded to bf16
  }
  sd->upstream = default_upstream(sd->problem, kSeed);
  g_shape = std::move(sd);
  return *g_shape;
}

size_t free_device_bytes() {
  cublas_handle();  // its workspace is allocated once, before any case: already off the free bytes
  size_t free_bytes = 0, total = 0;
  CCE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
  return free_bytes;
}

// Empty when `need` bytes fit in the free device memory; otherwise the reason.
std::string does_not_fit(size_t need) {
  const size_t free_bytes = free_device_bytes();
  if (need <= free_bytes) return "";
  return "needs " + format_mb(need) + ", the GPU has " + format_mb(free_bytes) + " free";
}

// The fp32 reference of a shape: stage 01 (all_stages()[0]) with dtype fp32 on the
// bf16-rounded inputs, forward and backward. Computed once per shape; needs the
// device memory free of any case (~13 GB at gemma2).
// Empty when the reference was computed; otherwise why not.
std::string try_reference(const ShapeData& sd, Reference& ref) {
  try {
    auto stage = all_stages().at(0)();
    if (!stage->has_backward()) return "stage " + stage->name() + " has no backward";
    Problem p = sd.problem;
    p.dtype = Dtype::kFloat32;
    const size_t need = input_bytes(p) + total_bytes(output_memory(p, true)) + total_bytes(stage->workspace(p, true));
    if (std::string why = does_not_fit(need); !why.empty()) return "the fp32 reference " + why;
    StageRunner runner(*stage, p, sd.inputs, sd.upstream);
    runner.forward_backward();
    HostOutputs out = runner.download();
    ref.loss = out.loss.at(0);
    ref.de = std::move(out.de);
    ref.dc = std::move(out.dc);
    ref.available = true;
    return "";
  } catch (const std::exception& e) {
    ref = Reference();
    return std::string("the fp32 reference failed: ") + e.what();
  }
}

void compute_reference(ShapeData& sd) {
  sd.reference_tried = true;
  sd.reference.why_not = try_reference(sd, sd.reference);
  if (!sd.reference.available)
    std::fprintf(stderr, "cce_bench: %s: no accuracy counters: %s\n", sd.name.c_str(), sd.reference.why_not.c_str());
}

// ‖x − ref‖ / ‖ref‖ (‖x − ref‖ when ref is all zeros), in double.
double rel_l2_error(const std::vector<float>& x, const std::vector<float>& ref) {
  if (x.size() != ref.size()) return std::nan("");
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double diff = static_cast<double>(x[i]) - static_cast<double>(ref[i]);
    num += diff * diff;
    den += static_cast<double>(ref[i]) * static_cast<double>(ref[i]);
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

// --- The cuBLAS floor ------------------------------------------------------------
// The products a loss (one GEMM) or a loss + gradient (four GEMMs) needs at
// least, as cuBLAS bf16 GEMMs with bf16 output and fp32 accumulation (the
// handle's default math mode). Nothing else: no softmax, no reduction. The
// gradient products read the logits buffer as dlogit: the same products as a
// real backward, not a correct gradient.
// The floor is the best cuBLAS can do: the product is timed with V padded to
// a multiple of 128 (C gets zero rows; the logits' leading dimension is the
// padded V), as torch.compile pads it. With V itself, an odd V (gpt2's 50257)
// drops cuBLAS off its fast kernels: 16.2 ms instead of 2.2 ms on an H100,
// and padding only the leading dimension (to 50272) did not help (16.2 ms).
// The floor's TFLOP/s count the unpadded V.

constexpr int64_t kFloorPadMultiple = 128;
int64_t floor_ld(int64_t v) { return (v + kFloorPadMultiple - 1) / kFloorPadMultiple * kFloorPadMultiple; }

struct FloorBuffers {
  Problem p;
  int64_t ld = 0;                      // leading dimension of logits: floor_ld(V)
  DeviceBuffer<uint16_t> e, c;         // bf16 [N,D], [V,D]
  DeviceBuffer<uint16_t> logits;       // bf16 [N,V] in rows of ld; also the dlogit operand
  DeviceBuffer<uint16_t> de, dc;       // bf16 [N,D], [V,D] (loss_grad only)

  // Row-major matrices seen by column-major cuBLAS as their transposes.
  void gemm_logits() const {  // logits[N,V] = E·Cᵀ
    const float one = 1.0f, zero = 0.0f;
    CCE_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), CUBLAS_OP_T, CUBLAS_OP_N, i(p.v), i(p.n), i(p.d), &one, c.get(),
                                  CUDA_R_16BF, i(p.d), e.get(), CUDA_R_16BF, i(p.d), &zero, logits.get(), CUDA_R_16BF,
                                  i(ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void gemm_de() const {  // dE[N,D] = dlogit[N,V]·C[V,D]
    const float one = 1.0f, zero = 0.0f;
    CCE_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_N, i(p.d), i(p.n), i(p.v), &one, c.get(),
                                  CUDA_R_16BF, i(p.d), logits.get(), CUDA_R_16BF, i(ld), &zero, de.get(), CUDA_R_16BF,
                                  i(p.d), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void gemm_dc() const {  // dC[V,D] = dlogitᵀ[V,N]·E[N,D]
    const float one = 1.0f, zero = 0.0f;
    CCE_CUBLAS_CHECK(cublasGemmEx(cublas_handle(), CUBLAS_OP_N, CUBLAS_OP_T, i(p.d), i(p.v), i(p.n), &one, e.get(),
                                  CUDA_R_16BF, i(p.d), logits.get(), CUDA_R_16BF, i(ld), &zero, dc.get(), CUDA_R_16BF,
                                  i(p.d), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  static int i(int64_t x) { return static_cast<int>(x); }  // Problem::validate keeps N, D, V below 2^31
};

size_t floor_bytes(const Problem& p, Mode mode) {  // inputs + outputs of the floor, bf16
  size_t elems = static_cast<size_t>(p.n * p.d + floor_ld(p.v) * p.d + p.n * floor_ld(p.v));
  if (mode == Mode::kLossGrad) elems += static_cast<size_t>(p.n * p.d + floor_ld(p.v) * p.d);
  return elems * 2;
}

std::vector<uint16_t> to_bf16_bits(const std::vector<float>& values) {
  std::vector<uint16_t> bits(values.size());
  for (size_t k = 0; k < values.size(); ++k) bits[k] = float_to_bf16_bits(values[k]);
  return bits;
}

// --- The active case, kept across its repetitions ----------------------------------

struct ActiveCase {
  std::string name;
  std::string error;  // non-empty: the case cannot run; every repetition reports it
  // Stage cases (the runner refers to the stage: declared after it, destroyed first).
  std::unique_ptr<Stage> stage;
  std::unique_ptr<StageRunner> runner;
  // Floor cases.
  std::unique_ptr<FloorBuffers> floor;
  std::function<void()> work;
  std::unique_ptr<CudaEventTimer> timer;
  double flops = 0.0;
  std::map<std::string, double> fixed_counters;  // peak_MB and the errors: measured once per case (its second run)
  bool is_floor = false;
  std::vector<double> floor_times_ms;  // floor cases: every timed iteration so far

  void release_device() {
    work = nullptr;
    runner.reset();
    stage.reset();
    floor.reset();
    timer.reset();
  }
};

std::unique_ptr<ActiveCase> g_case;
std::map<std::string, double> g_floor_ms;  // <mode>/<shape> -> median ms of the floor in this run
int g_calls = kDefaultCalls;

void setup_floor(ActiveCase& c, const CaseSpec& spec) {
  ShapeData& sd = shape_data(spec.shape);
  const Problem& p = sd.problem;
  c.is_floor = true;
  c.flops = gemm_flops(p, spec.mode, -1);
  c.error = does_not_fit(floor_bytes(p, spec.mode));
  if (!c.error.empty()) return;
  auto f = std::make_unique<FloorBuffers>();
  f->p = p;
  f->ld = floor_ld(p.v);
  f->p.v = f->ld;  // the padded product
  {
    std::vector<uint16_t> e = to_bf16_bits(sd.inputs.e), cc = to_bf16_bits(sd.inputs.c);
    cc.resize(static_cast<size_t>(f->p.v * p.d), 0);  // zero rows past V
    f->e = DeviceBuffer<uint16_t>(e.size());
    f->c = DeviceBuffer<uint16_t>(cc.size());
    copy_to_device(f->e.get(), e.data(), e.size() * 2);
    copy_to_device(f->c.get(), cc.data(), cc.size() * 2);
  }
  const size_t baseline = AllocationTracker::current_bytes();  // cuBLAS workspace and the inputs
  AllocationTracker::reset_peak();
  f->logits = DeviceBuffer<uint16_t>(static_cast<size_t>(p.n * f->ld));
  const FloorBuffers* fp = f.get();
  if (spec.mode == Mode::kLoss) {
    c.work = [fp] { fp->gemm_logits(); };
  } else {
    f->de = DeviceBuffer<uint16_t>(static_cast<size_t>(p.n * p.d));
    f->dc = DeviceBuffer<uint16_t>(static_cast<size_t>(f->p.v * p.d));
    c.work = [fp] {
      fp->gemm_logits();  // forward
      fp->gemm_logits();  // the backward's recompute
      fp->gemm_de();
      fp->gemm_dc();
    };
  }
  c.floor = std::move(f);
  c.work();
  CCE_CUDA_CHECK(cudaDeviceSynchronize());
  c.fixed_counters["peak_MB"] = static_cast<double>(AllocationTracker::peak_bytes() - baseline) / 1e6;
  c.fixed_counters["logits_ld"] = static_cast<double>(c.floor->ld);
}

void setup_stage(ActiveCase& c, const CaseSpec& spec) {
  ShapeData& sd = shape_data(spec.shape);
  if (!sd.reference_tried) compute_reference(sd);  // before this case allocates anything
  const Problem& p = sd.problem;
  const bool backward = spec.mode == Mode::kLossGrad;
  c.stage = spec.factory();
  c.stage->validate_options();
  c.flops = gemm_flops(p, spec.mode, stage_number(c.stage->name()));
  const size_t need =
      input_bytes(p) + total_bytes(output_memory(p, backward)) + total_bytes(c.stage->workspace(p, backward));
  c.error = does_not_fit(need);
  if (!c.error.empty()) return;
  c.runner = std::make_unique<StageRunner>(*c.stage, p, sd.inputs, sd.upstream);
  StageRunner* r = c.runner.get();
  if (backward)
    c.work = [r] { r->forward_backward(); };
  else
    c.work = [r] { r->forward(); };
  // Two runs, the second measured for accuracy: a stage may plan a batch from
  // the one before (stage 10's dense plan before the forward), as the timed
  // runs do. The peak memory covers both.
  c.work();
  r->poison_outputs();
  c.work();
  r->synchronize();
  c.fixed_counters["peak_MB"] = static_cast<double>(r->peak_beyond_inputs()) / 1e6;
  const Reference& ref = sd.reference;
  if (ref.available) {
    HostOutputs out = r->download();
    c.fixed_counters["loss_rel_err"] =
        std::fabs(static_cast<double>(out.loss.at(0)) - ref.loss) / std::max(std::fabs(static_cast<double>(ref.loss)), 1e-30);
    if (backward) {
      c.fixed_counters["dE_rel_err"] = rel_l2_error(out.de, ref.de);
      c.fixed_counters["dC_rel_err"] = rel_l2_error(out.dc, ref.dc);
    }
  }
  // Stages 07 and 08 count the backward tiles they kept (the rest skip their products).
  if (backward) {
    if (const auto* filter = dynamic_cast<const s07::FilterSortStage*>(c.stage.get())) {
      const s07::FilterStats st = filter->stats();
      if (st.tiles > 0) c.fixed_counters["kept_frac"] = static_cast<double>(st.kept_tiles) / st.tiles;
    }
    if (const auto* drop = dynamic_cast<const s08::DropBeforeRecomputeStage*>(c.stage.get())) {
      const s08::DropStats st = drop->stats();
      if (st.pairs > 0) c.fixed_counters["kept_frac"] = static_cast<double>(st.kept_pairs) / st.pairs;
      if (st.eps > 0.0f) c.fixed_counters["drop_eps_log2"] = std::log2(st.eps);
    }
    if (const auto* drop = dynamic_cast<const s09::DeterministicProductsStage*>(c.stage.get())) {  // stage 10 too
      const s09::DropStats st = drop->stats();
      if (st.tiles > 0) c.fixed_counters["kept_frac"] = static_cast<double>(st.kept_tiles) / st.tiles;
      if (st.eps > 0.0f) c.fixed_counters["drop_eps_log2"] = std::log2(st.eps);
    }
    if (const auto* plan = dynamic_cast<const s10::PlanPerBatchStage*>(c.stage.get())) {
      const s10::EpsChoice choice = plan->eps_choice();
      if (choice.misplaced_mass >= 0.0) c.fixed_counters["misplaced_mass"] = choice.misplaced_mass;
      // Which backward ran (1: the dense plan, every pair recomputed by cuBLAS), and the share the
      // decision would keep, which chose it.
      const s10::PlanChoice ran = plan->plan_choice();
      c.fixed_counters["dense_plan"] = ran.plan == s10::BackwardPlan::kDense ? 1.0 : 0.0;
      c.fixed_counters["dense_before_forward"] = ran.before_forward ? 1.0 : 0.0;  // loss and gradient by 3 GEMMs
      if (ran.kept_fraction >= 0.0) c.fixed_counters["decided_kept_frac"] = ran.kept_fraction;
    }
  }
}

ActiveCase& activate(const CaseSpec& spec) {
  if (g_case && g_case->name == spec.name) return *g_case;
  g_case.reset();  // frees the previous case's device memory first
  g_case = std::make_unique<ActiveCase>();
  ActiveCase& c = *g_case;
  c.name = spec.name;
  try {
    if (spec.factory == nullptr)
      setup_floor(c, spec);
    else
      setup_stage(c, spec);
    if (c.error.empty()) {
      for (int k = 0; k < kWarmupRuns; ++k) c.work();
      CCE_CUDA_CHECK(cudaDeviceSynchronize());
      c.timer = std::make_unique<CudaEventTimer>();
    }
  } catch (const std::exception& e) {  // CudaError (e.g. a failed cudaMalloc), InputError, bad_alloc
    c.error = e.what();
  }
  if (!c.error.empty()) c.release_device();
  return c;
}

void run_case(benchmark::State& state, const CaseSpec& spec) {
  ActiveCase& c = activate(spec);
  if (!c.error.empty()) {
    state.SkipWithError(c.error.c_str());
    return;
  }
  std::vector<double> times_ms;  // one call: a repetition is one iteration
  for (auto _ : state) {
    double ms = 0.0;
    try {
      c.timer->start();
      c.work();
      ms = c.timer->stop();
    } catch (const std::exception& e) {
      c.error = e.what();
      c.release_device();
      state.SkipWithError(c.error.c_str());
      break;
    }
    state.SetIterationTime(ms / 1e3);
    times_ms.push_back(ms);
  }
  if (!c.error.empty() || times_ms.empty()) return;

  const double rep_ms = median(times_ms);
  if (c.is_floor) {
    c.floor_times_ms.insert(c.floor_times_ms.end(), times_ms.begin(), times_ms.end());
    g_floor_ms[spec.floor_key] = median(c.floor_times_ms);
  }
  const auto floor = g_floor_ms.find(spec.floor_key);
  const double floor_ratio = floor != g_floor_ms.end() && floor->second > 0.0 ? rep_ms / floor->second : 0.0;
  for (const auto& [key, value] : c.fixed_counters) state.counters[key] = benchmark::Counter(value);
  state.counters["TFLOPs"] = benchmark::Counter(c.flops / (rep_ms * 1e-3) / 1e12);
  state.counters["floor_ratio"] = benchmark::Counter(floor_ratio);
}

// --- Registration, flags, context ------------------------------------------------

std::vector<CaseSpec> make_cases(const std::vector<Shape>& shapes) {
  struct StageInfo {
    StageFactory factory;
    std::string name;
    bool backward;
  };
  std::vector<StageInfo> stages;
  for (StageFactory factory : all_stages()) {
    auto stage = factory();
    stages.push_back({factory, "stage" + stage->name(), stage->has_backward()});
  }
  std::vector<CaseSpec> cases;
  for (const Shape& shape : shapes) {
    // The floors first: every stage case of the shape divides by them.
    for (Mode mode : {Mode::kLoss, Mode::kLossGrad}) {
      const std::string key = std::string(to_string(mode)) + "/" + shape.name;
      cases.push_back({"cublas_floor/" + key, shape, mode, nullptr, key});
    }
    for (const StageInfo& s : stages) {
      for (Mode mode : {Mode::kLoss, Mode::kLossGrad}) {
        if (mode == Mode::kLossGrad && !s.backward) continue;
        const std::string key = std::string(to_string(mode)) + "/" + shape.name;
        cases.push_back({s.name + "/" + key, shape, mode, s.factory, key});
      }
    }
  }
  return cases;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string command_output(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
  pclose(pipe);
  return trim(out);
}

// CCE_COMMIT from the environment if set; otherwise the source tree's git HEAD.
std::string commit_text() {
  if (const char* env = std::getenv("CCE_COMMIT"); env != nullptr && *env != '\0') return env;
  const std::string dir = CCE_SOURCE_DIR;
  if (dir.empty() || dir.find('\'') != std::string::npos) return "unknown";
  const std::string git = "git -C '" + dir + "' ";
  const std::string head = command_output(git + "rev-parse --short=12 HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  const std::string dirty = command_output(git + "status --porcelain --untracked-files=no 2>/dev/null");
  return dirty.empty() ? head : head + " (with uncommitted changes)";
}

std::string format_softcap(float s) {  // 30 -> "30", 0.5 -> "0.5"
  char text[32];
  std::snprintf(text, sizeof(text), "%g", static_cast<double>(s));
  return text;
}

std::string version_text(int v) {  // 12040 -> "12.4 (12040)"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10) + " (" + std::to_string(v) + ")";
}

void add_gpu_context(const std::vector<Shape>& shapes, const std::string& lm_data) {
  int device = 0;
  CCE_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  auto attr = [&](cudaDeviceAttr a) {
    int value = 0;
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&value, a, device));
    return value;
  };
  int driver = 0, runtime = 0, cublas = 0;
  CCE_CUDA_CHECK(cudaDriverGetVersion(&driver));
  CCE_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  CCE_CUBLAS_CHECK(cublasGetVersion(cublas_handle(), &cublas));
  benchmark::AddCustomContext("gpu_name", prop.name);
  benchmark::AddCustomContext("gpu_compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor));
  benchmark::AddCustomContext("gpu_sm_count", std::to_string(attr(cudaDevAttrMultiProcessorCount)));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(attr(cudaDevAttrL2CacheSize)));
  benchmark::AddCustomContext("gpu_memory_bytes", std::to_string(prop.totalGlobalMem));
  benchmark::AddCustomContext("gpu_sm_clock_max_MHz", std::to_string(attr(cudaDevAttrClockRate) / 1000));
  benchmark::AddCustomContext("gpu_sm_clock_current",
                              "not recorded (needs NVML, which cce_bench does not link; see nvidia-smi -q -d CLOCK)");
  benchmark::AddCustomContext("gpu_memory_clock_max_MHz", std::to_string(attr(cudaDevAttrMemoryClockRate) / 1000));
  benchmark::AddCustomContext("gpu_memory_bus_width_bits", std::to_string(attr(cudaDevAttrGlobalMemoryBusWidth)));
  // The CUDA version the driver supports, not the NVIDIA driver release (that needs NVML).
  benchmark::AddCustomContext("cuda_driver_version", version_text(driver));
  benchmark::AddCustomContext("cuda_runtime_version", version_text(runtime));
  benchmark::AddCustomContext("cublas_version", std::to_string(cublas));
  benchmark::AddCustomContext("cce_commit", commit_text());
  // Which tile products ran: an sm_80-only build on a Hopper GPU runs the A100's.
  Problem probe;  // any bf16 problem with D % 8 == 0 chooses the same paths
  probe.dtype = Dtype::kBFloat16;
  benchmark::AddCustomContext("cce_cuda_architectures", CCE_CUDA_ARCHITECTURES);
  benchmark::AddCustomContext("cce_tile_paths", std::string("forward: ") + to_string(choose_forward_path(probe)) +
                                                    "; backward: " + to_string(choose_block_path(probe)));
  std::string capped;  // the generated shapes with a softcap, from their table
  for (const GeneratedShape& g : kGeneratedShapes)
    if (g.softcap > 0.0f) capped += std::string("; ") + g.name + ": softcap " + format_softcap(g.softcap);
  benchmark::AddCustomContext("cce_data", "bf16, realistic data, mean reduction, seed " + std::to_string(kSeed) +
                                              "; gemma2_flat: random (flat) data, otherwise the same" + capped +
                                              "; lm shapes: trained-model data from their files (bf16 values)");
  benchmark::AddCustomContext("cce_lm_data", lm_data);
  benchmark::AddCustomContext("cce_floor", "cuBLAS bf16 GEMMs, fp32 accumulation, V padded to a multiple of " +
                                           std::to_string(kFloorPadMultiple) +
                                           " (zero rows of C; counter logits_ld = the padded V)");
  benchmark::AddCustomContext("cce_iterations", std::to_string(g_calls) +
                                                    " timed calls per case in a row, each its own repetition (median, "
                                                    "min, max over single calls), after " +
                                                    std::to_string(2 + kWarmupRuns) + " untimed runs per stage case (" +
                                                    std::to_string(1 + kWarmupRuns) + " per floor case)");
  std::string shape_text;
  for (const Shape& s : shapes) {
    if (!shape_text.empty()) shape_text += ", ";
    shape_text += s.name + " N=" + std::to_string(s.n) + " D=" + std::to_string(s.d) + " V=" + std::to_string(s.v);
    if (!s.files.empty()) shape_text += " (" + s.files + ")";
    std::string notes;
    if (s.files.empty() && s.data != DataMode::kRealistic) notes = std::string(to_string(s.data)) + " data";
    if (s.softcap > 0.0f) notes += (notes.empty() ? "" : ", ") + std::string("softcap ") + format_softcap(s.softcap);
    if (!notes.empty()) shape_text += " (" + notes + ")";
  }
  benchmark::AddCustomContext("cce_shapes", shape_text);
}

struct BenchFlags {
  std::vector<Shape> shapes;
  std::string lm_data = kDefaultLmData;
  int calls = kDefaultCalls;
  bool list_only = false;
  bool help = false;
};

std::string known_shapes() {
  std::string out;
  for (const GeneratedShape& s : kGeneratedShapes) out += std::string(out.empty() ? "" : ", ") + s.name;
  for (const LmShape& s : kLmShapes) out += std::string(", ") + s.name;
  return out;
}

// A trained-model shape from DIR/<name>/: N, D, V from the files' headers. Empty `why` when usable.
Shape lm_shape(const std::string& lm_data, const std::string& name, std::string* why) {
  namespace fs = std::filesystem;
  Shape shape;
  shape.name = name;
  shape.files = (fs::path(lm_data) / name).string();
  for (const char* file : {"e.npy", "c.npy", "targets.npy"}) {
    if (!fs::is_regular_file(fs::path(shape.files) / file)) {
      *why = shape.files + " has no " + file;
      return shape;
    }
  }
  try {
    peek_inputs(shape.files, &shape.n, &shape.d, &shape.v);
  } catch (const InputError& e) {
    *why = e.what();
  }
  return shape;
}

bool lm_files_present(const std::string& lm_data, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(lm_data) / name;
  std::error_code ec;
  return fs::is_regular_file(dir / "e.npy", ec) && fs::is_regular_file(dir / "c.npy", ec) &&
         fs::is_regular_file(dir / "targets.npy", ec);
}

// Takes --shapes, --calls and --lm-data out of argv (Google Benchmark's flags stay).
BenchFlags parse_own_flags(int* argc, char** argv) {
  BenchFlags flags;
  std::string shapes_text, calls_text, lm_data_text, iters_text;
  bool shapes_set = false, calls_set = false, lm_data_set = false, iters_set = false;
  int out = 1;
  for (int k = 1; k < *argc; ++k) {
    const std::string arg = argv[k];
    auto take = [&](const std::string& flag, std::string* value, bool* set) {
      if (arg == flag) {
        if (k + 1 >= *argc) throw InputError(flag + " needs a value");
        *value = argv[++k];
      } else if (arg.rfind(flag + "=", 0) == 0) {
        *value = arg.substr(flag.size() + 1);
      } else {
        return false;
      }
      *set = true;
      return true;
    };
    if (take("--shapes", &shapes_text, &shapes_set) || take("--calls", &calls_text, &calls_set) ||
        take("--iters", &iters_text, &iters_set) || take("--lm-data", &lm_data_text, &lm_data_set))
      continue;
    if (arg == "--help" || arg == "-h") flags.help = true;
    if (arg.rfind("--benchmark_list_tests", 0) == 0 && arg != "--benchmark_list_tests=false" &&
        arg != "--benchmark_list_tests=0")
      flags.list_only = true;
    argv[out++] = argv[k];
  }
  *argc = out;
  argv[out] = nullptr;

  if (lm_data_set) {
    if (lm_data_text.empty()) throw InputError("--lm-data expects a directory, got ''");
    flags.lm_data = lm_data_text;
  }
  const size_t generated = std::size(kGeneratedShapes), all = generated + std::size(kLmShapes);
  auto shape_name = [&](size_t s) {
    return std::string(s < generated ? kGeneratedShapes[s].name : kLmShapes[s - generated].name);
  };
  std::vector<bool> chosen(all, false);
  if (shapes_set) {
    size_t start = 0;
    while (start <= shapes_text.size()) {
      size_t comma = shapes_text.find(',', start);
      if (comma == std::string::npos) comma = shapes_text.size();
      const std::string name = shapes_text.substr(start, comma - start);
      bool found = false;
      for (size_t s = 0; s < all; ++s)
        if (name == shape_name(s)) chosen[s] = found = true;
      if (!found) throw InputError("unknown shape '" + name + "' (known: " + known_shapes() + ")");
      start = comma + 1;
    }
  } else {
    // By default: the generated shapes, and the trained-model ones whose files are there.
    for (size_t s = 0; s < all; ++s) chosen[s] = s < generated || lm_files_present(flags.lm_data, shape_name(s));
  }
  for (size_t s = 0; s < all; ++s) {  // always in the canonical order
    if (!chosen[s]) continue;
    if (s < generated) {
      const GeneratedShape& g = kGeneratedShapes[s];
      flags.shapes.push_back({g.name, g.n, g.d, g.v, "", g.data, g.softcap});
      continue;
    }
    std::string why;
    Shape shape = lm_shape(flags.lm_data, shape_name(s), &why);
    if (why.empty()) {
      flags.shapes.push_back(shape);
    } else {  // one line, and the other shapes still run
      std::fprintf(stderr, "cce_bench: %s skipped: %s (write it with python3 bench/lm_data.py --out %s --only %s)\n",
                   shape.name.c_str(), why.c_str(), flags.lm_data.c_str(), kLmShapes[s - generated].dataset);
    }
  }
  if (flags.shapes.empty() && !flags.help)
    throw InputError("no shape left to run (the trained-model data asked for is not there)");
  if (iters_set) throw InputError("--iters is gone: --calls=K sets the timed calls per case (default 50)");
  if (calls_set) {
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(calls_text.c_str(), &end, 10);
    if (calls_text.empty() || *end != '\0' || errno != 0 || value < 1 || value > 1000000)
      throw InputError("--calls expects an integer >= 1, got '" + calls_text + "'");
    flags.calls = static_cast<int>(value);
  }
  return flags;
}

int bench_main(int argc, char** argv) {
  const BenchFlags flags = parse_own_flags(&argc, argv);
  if (flags.help) {
    std::printf(
        "usage: cce_bench [--shapes=NAME,...] [--calls=K] [--lm-data=DIR] [Google Benchmark flags]\n"
        "  --shapes=NAME,...  shapes to run, of: %s\n"
        "                     (default: the generated ones, and each lm shape whose files are in --lm-data)\n"
        "  --calls=K          timed calls per case, in a row (default %d): median, min, max of single calls\n"
        "  --lm-data=DIR      trained-model data: DIR/<shape>/{e,c,targets}.npy from bench/lm_data.py\n"
        "                     (default %s)\n"
        "Benchmarks are named <impl>/<mode>/<shape>; see bench/README.md.\n",
        known_shapes().c_str(), kDefaultCalls, kDefaultLmData);
    std::printf("generated shapes (bf16, mean reduction, seed %llu):  name N D V data softcap (0: none)\n",
                static_cast<unsigned long long>(kSeed));
    for (const GeneratedShape& g : kGeneratedShapes)
      std::printf("  %-14s %6lld %5lld %6lld  %-9s %s\n", g.name, static_cast<long long>(g.n),
                  static_cast<long long>(g.d), static_cast<long long>(g.v), to_string(g.data),
                  format_softcap(g.softcap).c_str());
    std::printf("trained-model shapes (N, D, V from the files):  name, then the lm_data.py --only that writes it\n");
    for (const LmShape& l : kLmShapes) std::printf("  %-12s %s\n", l.name, l.dataset);
    std::printf("\n");
  }
  g_calls = flags.calls;
  // Registered before Initialize, so that --benchmark_list_tests and --help work without a GPU.
  for (const CaseSpec& spec : make_cases(flags.shapes)) {
    benchmark::RegisterBenchmark(spec.name.c_str(), [spec](benchmark::State& state) { run_case(state, spec); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1)
        ->Repetitions(g_calls)
        ->ComputeStatistics("min", &fastest)
        ->ComputeStatistics("max", &slowest)
        ->ReportAggregatesOnly(true);
  }
  benchmark::Initialize(&argc, argv);  // exits after printing the usage on --help
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return kExitBadInput;
  if (!flags.list_only) {
    std::string why;
    if (probe_gpu(&why) == GpuState::kBroken) {
      std::fprintf(stderr, "cce_bench: CUDA error: %s\n", why.c_str());
      return 1;
    }
    if (!cuda_device_available(&why)) {
      std::printf("cce_bench: SKIPPED: no usable CUDA device (%s)\n", why.c_str());
      benchmark::Shutdown();
      return kExitSkipped;
    }
    add_gpu_context(flags.shapes, flags.lm_data);
  }
  benchmark::RunSpecifiedBenchmarks();
  g_case.reset();  // device memory back before the CUDA runtime goes
  g_shape.reset();
  benchmark::Shutdown();
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench_main(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "cce_bench: error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {  // CudaError outside a case (context queries)
    std::fprintf(stderr, "cce_bench: CUDA error: %s\n", e.what());
    return kExitCheckFailed;
  }
}
