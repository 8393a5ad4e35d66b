// cce_tour: every stage on one problem, one comparison table.
//
// With a GPU: each stage runs forward (and backward where it has one), is
// checked against the CPU reference (sampled rows at large sizes), timed, and
// its peak device memory measured. Without a GPU (or with --memory-model): the
// memory each stage would need for the problem asked for, from the stages'
// memory models.
#include <cstdio>
#include <string>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/driver.h"
#include "common/runner.h"
#include "common/stage_table.h"

namespace {

using namespace cce;

// Sizes in the tour's tables, in steps of 10^3: "412.0 kB" under 1 MB, where
// "0.4 MB" would hide a fused forward's scratch, and "8388.7 MB" above.
std::string format_size(size_t bytes) {
  char buf[64];
  if (bytes < 1000)
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else if (bytes < 1000000)
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// Printed under both tables: the stage table runs every stage on one GPU.
constexpr const char* kWhyNoStage11 =
    "Stage 11 is not in this table: it splits C over several GPUs, and the tour runs every stage on one.\n";

void print_memory_table(const Problem& p) {
  std::printf("Memory each stage needs at %s (beyond the %s of inputs; cuBLAS workspace %s not included):\n\n",
              p.describe().c_str(), format_size(input_bytes(p)).c_str(), format_size(kCublasWorkspaceBytes).c_str());
  std::printf("| stage | forward | forward+backward | largest item |\n| --- | --- | --- | --- |\n");
  for (StageFactory factory : all_stages()) {
    auto stage = factory();
    auto fwd = output_memory(p, false);
    for (auto& item : stage->workspace(p, false)) fwd.push_back(item);
    std::string both = "-", largest;
    size_t largest_bytes = 0;
    if (stage->has_backward()) {
      auto items = output_memory(p, true);
      for (auto& item : stage->workspace(p, true)) items.push_back(item);
      both = format_size(total_bytes(items));
      for (auto& item : items)
        if (item.second > largest_bytes) largest_bytes = item.second, largest = item.first;
    }
    for (auto& item : fwd)
      if (item.second > largest_bytes) largest_bytes = item.second, largest = item.first;
    std::printf("| %s | %s | %s | %s (%s) |\n", stage->name().c_str(), format_size(total_bytes(fwd)).c_str(),
                both.c_str(), largest.c_str(), format_size(largest_bytes).c_str());
  }
  std::printf("\n%s", kWhyNoStage11);
}

int tour(int argc, char** argv) {
  int64_t n = kDefaultN, d = kDefaultD, v = kDefaultV, seed = 1234, iters = 5;
  std::string dtype = "bf16", data = "realistic";
  bool memory_model = false;
  OptionParser parser("cce_tour");
  add_shape_options(parser, &n, &d, &v, "tokens N (the default fits a 16 GB GPU for every stage)");
  parser.add_string("dtype", &dtype, "bf16 or fp32");
  parser.add_string("data", &data, "random or realistic");
  parser.add_int("seed", &seed, "seed of the inputs");
  parser.add_int("iters", &iters, "timed iterations per stage (median)");
  parser.add_flag("memory-model", &memory_model, "only print the memory table (what a machine without a GPU prints)");
  if (!parser.parse(argc, argv)) return kExitOk;
  if (iters < 1) throw InputError("--iters must be >= 1");
  Problem p;
  p.n = n;
  p.d = d;
  p.v = v;
  p.dtype = parse_dtype(dtype);
  p.validate();
  GeneratorOptions gen;
  gen.mode = parse_data_mode(data);
  gen.seed = static_cast<uint64_t>(seed);

  if (memory_model) {
    print_memory_table(p);
    return kExitOk;
  }
  std::string why;
  const GpuState gpu = probe_gpu(&why);
  if (gpu == GpuState::kBroken) {  // a GPU that CUDA cannot use is an error, not "no GPU"
    std::fprintf(stderr, "cce_tour: CUDA error: %s\n", why.c_str());
    return kExitCheckFailed;
  }
  if (gpu == GpuState::kMissing) {
    std::printf("cce_tour: %s.\n", why.c_str());
    std::printf("Every stage was built; none can run here.\n\n");
    print_memory_table(p);
    return kExitOk;
  }
  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("cce_tour on %s: %s, %s data, seed %lld\n", prop.name, p.describe().c_str(), data.c_str(),
              static_cast<long long>(seed));
  HostInputs inputs = generate_inputs(p, gen);
  std::vector<float> upstream = ones_upstream(p);

  std::printf("\n| stage | loss | max LSE err | max dE err (rel L2) | forward ms | fwd+bwd ms | peak fwd | peak fwd+bwd |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  bool all_passed = true;
  for (StageFactory factory : all_stages()) {
    auto stage = factory();
    const bool backward = stage->has_backward();
    StageRunner runner(*stage, p, inputs, upstream);
    runner.poison_outputs();
    runner.forward();
    runner.synchronize();
    const size_t peak_fwd = runner.peak_beyond_inputs();
    std::string peak_both = "-", fwd_bwd_ms = "-", de_err = "-";
    if (backward) {
      runner.reset_peak_memory();
      runner.poison_outputs();
      runner.forward_backward();
      runner.synchronize();
      peak_both = format_size(runner.peak_beyond_inputs());
    }
    HostOutputs out = runner.download();
    CheckReport check = check_outputs(p, inputs, out, upstream, backward, int64_t{1} << 26, 8,
                                      stage->gradient_approximation());
    all_passed = all_passed && check.passed();
    double lse_err = 0.0;
    for (const auto& c : check.comparisons) {
      if (c.name == "lse") lse_err = c.max_abs_error;
      if (c.name == "dE") {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2e (%.2e)", c.max_abs_error, c.rel_l2_error);
        de_err = buf;
      }
    }
    const double fwd_ms = runner.time_forward_ms(static_cast<int>(iters));
    if (backward) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.2f", runner.time_forward_backward_ms(static_cast<int>(iters)));
      fwd_bwd_ms = buf;
    }
    std::printf("| %s%s | %.5f | %.2e | %s | %.2f | %s | %s | %s |\n", stage->name().c_str(),
                check.passed() ? "" : " (CHECK FAILED)", out.loss[0], lse_err, de_err.c_str(), fwd_ms,
                fwd_bwd_ms.c_str(), format_size(peak_fwd).c_str(), peak_both.c_str());
    std::fflush(stdout);
  }
  std::printf("\nErrors are against the double-precision CPU reference on sampled rows; peak is device memory\n"
              "beyond the inputs (%s), outputs included; times are medians of %lld runs.\n%s",
              format_size(input_bytes(p)).c_str(), static_cast<long long>(iters), kWhyNoStage11);
  return all_passed ? kExitOk : kExitCheckFailed;
}

}  // namespace

int main(int argc, char** argv) {
  return cce::run_program("cce_tour", [&] { return tour(argc, argv); });
}
