#include "common/driver.h"

#include <cstdio>
#include <filesystem>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/npy.h"
#include "common/runner.h"

namespace cce {

std::string format_mb(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

namespace {

struct CommonFlags {
  int64_t n = 2048, d = 2304, v = 256000, seed = 1234, iters = 10, ignore_index = -100;
  std::string dtype = "bf16", data = "realistic", reduction = "mean", load, save;
  double ignore_frac = 0.0, softcap = 0.0;
  bool backward = false, check = false;
};

void save_outputs(const std::string& dir, const Problem& p, const HostOutputs& out) {
  namespace fs = std::filesystem;
  std::vector<int64_t> loss_shape;
  if (p.reduction == Reduction::kNone) loss_shape = {p.n};
  write_npy((fs::path(dir) / "loss.npy").string(), out.loss.data(), loss_shape);
  write_npy((fs::path(dir) / "lse.npy").string(), out.lse.data(), {p.n});
  if (!out.de.empty()) write_npy((fs::path(dir) / "de.npy").string(), out.de.data(), {p.n, p.d});
  if (!out.dc.empty()) write_npy((fs::path(dir) / "dc.npy").string(), out.dc.data(), {p.v, p.d});
}

int run(StageFactory factory, const std::string& program, int argc, char** argv) {
  std::unique_ptr<Stage> stage = factory();
  CommonFlags f;
  OptionParser parser(program);
  parser.add_int("n", &f.n, "tokens N");
  parser.add_int("d", &f.d, "hidden size D");
  parser.add_int("v", &f.v, "vocabulary size V");
  parser.add_string("dtype", &f.dtype, "input dtype: bf16 or fp32");
  parser.add_int("seed", &f.seed, "seed of the generated inputs");
  parser.add_string("data", &f.data, "generated inputs: random or realistic (LM-like softmax)");
  parser.add_double("ignore-frac", &f.ignore_frac, "share of targets set to ignore_index");
  parser.add_int("ignore-index", &f.ignore_index, "target value that marks an ignored token");
  parser.add_double("softcap", &f.softcap, "softcap s: logits -> s*tanh(logits/s); 0 = off");
  parser.add_string("reduction", &f.reduction, "mean, sum or none");
  parser.add_flag("backward", &f.backward, "also compute dE and dC");
  parser.add_flag("check", &f.check, "compare with the double-precision CPU reference");
  parser.add_int("iters", &f.iters, "timed iterations (median reported); 0 = no timing");
  parser.add_string("load", &f.load, "read e.npy, c.npy, targets.npy from this directory");
  parser.add_string("save", &f.save, "write the inputs and loss/lse/de/dc .npy to this directory");
  stage->add_options(parser);
  if (!parser.parse(argc, argv)) return kExitOk;
  stage->validate_options();

  Problem p;
  p.n = f.n;
  p.d = f.d;
  p.v = f.v;
  p.dtype = parse_dtype(f.dtype);
  p.reduction = parse_reduction(f.reduction);
  p.ignore_index = f.ignore_index;
  p.softcap = static_cast<float>(f.softcap);
  GeneratorOptions gen;
  gen.mode = parse_data_mode(f.data);
  gen.seed = static_cast<uint64_t>(f.seed);
  gen.ignore_fraction = f.ignore_frac;
  if (f.iters < 0) throw InputError("--iters must be >= 0");
  if (f.backward && !stage->has_backward())
    throw InputError("--backward: stage " + stage->name() + " computes the forward only (the backward comes in stage 06)");
  if (!f.load.empty() && (parser.was_set("n") || parser.was_set("d") || parser.was_set("v") || parser.was_set("data")))
    throw InputError("--load takes N, D and V from the files: drop --n, --d, --v and --data");
  if (!f.load.empty() && parser.was_set("ignore-frac"))
    throw InputError("--ignore-frac applies to generated data; with --load, mark ignored tokens in targets.npy");
  p.validate();
  if (f.load.empty()) validate_generator_options(p, gen);

  HostInputs inputs;
  std::string source;
  if (!f.load.empty()) {
    inputs = load_inputs(f.load, p);
    source = "loaded from " + f.load;
  }
  std::string why;
  const bool have_gpu = cuda_device_available(&why);
  if (!have_gpu && f.save.empty()) {
    std::printf("%s: SKIPPED: no usable CUDA device (%s)\n", program.c_str(), why.c_str());
    return kExitSkipped;
  }
  if (f.load.empty()) {
    inputs = generate_inputs(p, gen);
    source = std::string(to_string(gen.mode)) + " data, seed " + std::to_string(f.seed);
  }
  if (!f.save.empty()) save_inputs(f.save, inputs);
  if (!have_gpu) {
    std::printf("%s: inputs saved to %s; SKIPPED: no usable CUDA device (%s)\n", program.c_str(), f.save.c_str(),
                why.c_str());
    return kExitSkipped;
  }

  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s  %s  (%s)  on %s\n", program.c_str(), p.describe().c_str(), source.c_str(), prop.name);

  std::vector<float> upstream = default_upstream(p, gen.seed);
  StageRunner runner(*stage, p, inputs, upstream);
  runner.poison_outputs();
  if (f.backward)
    runner.forward_backward();
  else
    runner.forward();
  HostOutputs out = runner.download();
  const size_t peak = runner.peak_beyond_inputs();

  if (p.reduction == Reduction::kNone) {
    double sum = 0;
    for (float x : out.loss) sum += x;
    std::printf("  loss         none: %lld per-token values, their sum %.6f\n", static_cast<long long>(p.n), sum);
  } else {
    std::printf("  loss         %.6f (%s over %lld of %lld tokens)\n", out.loss[0], to_string(p.reduction),
                static_cast<long long>(count_valid_targets(p, inputs.targets)), static_cast<long long>(p.n));
  }
  for (const auto& line : stage->report_lines()) std::printf("  %s\n", line.c_str());

  int status = kExitOk;
  if (f.check) {
    CheckReport report = check_outputs(p, inputs, out, upstream, f.backward, int64_t{1} << 26, 8,
                                       stage->gradient_tolerance_scale());
    std::printf("  check        %s\n", report.note.c_str());
    for (const auto& c : report.comparisons) {
      std::printf("    %s\n", c.summary().c_str());
      for (const auto& m : c.first_mismatches) std::printf("      %s\n", m.c_str());
    }
    if (!report.passed()) status = kExitCheckFailed;
    std::printf("  check        %s\n", report.passed() ? "PASSED" : "FAILED");
  }
  if (!f.save.empty()) save_outputs(f.save, p, out);

  if (f.iters > 0) {
    double fwd = runner.time_forward_ms(static_cast<int>(f.iters));
    std::printf("  time         forward %.3f ms", fwd);
    if (f.backward) std::printf("   forward+backward %.3f ms", runner.time_forward_backward_ms(static_cast<int>(f.iters)));
    std::printf("   (median of %lld)\n", static_cast<long long>(f.iters));
  }
  std::vector<MemoryItem> model = runner.memory_model(f.backward);
  std::printf("  memory       peak %s beyond the inputs (inputs %s); model %s:", format_mb(peak).c_str(),
              format_mb(runner.input_bytes()).c_str(), format_mb(total_bytes(model)).c_str());
  for (const auto& item : model) std::printf(" %s %s,", item.first.c_str(), format_mb(item.second).c_str());
  std::printf(" cuBLAS workspace %s not included\n", format_mb(kCublasWorkspaceBytes).c_str());
  return status;
}

}  // namespace

int run_stage_main(StageFactory factory, int argc, char** argv) {
  const std::string program = "stage" + factory()->name();
  const char* name = program.c_str();
  try {
    return run(factory, program, argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return kExitBadInput;
  } catch (const CudaError& e) {
    std::fprintf(stderr, "%s: CUDA error: %s\n", name, e.what());
    return kExitCheckFailed;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: error: out of host memory for this problem size\n", name);
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    return kExitCheckFailed;
  }
}

}  // namespace cce
