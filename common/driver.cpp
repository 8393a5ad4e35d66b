#include "common/driver.h"

#include <cstdio>
#include <functional>
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

struct CommonFlags : ProblemFlags, FileFlags {
  int64_t iters = 10;
  std::string upstream;
  bool backward = false, check = false;
};

// Without --save-large, --save refuses to write more than this: at the
// default D and V, c.npy alone is 2.4 GB, whatever --n is.
constexpr double kSaveLimitBytes = 1e9;  // 1 GB, as the messages say

// "616 B", "18.9 MB", "2.36 GB" (10^3 steps, like format_mb).
std::string format_size(double bytes) {
  char buf[64];
  if (bytes < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else if (bytes < 1e6)
    std::snprintf(buf, sizeof buf, "%.1f kB", bytes / 1e3);
  else if (bytes < 1e9)
    std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

// One .npy file --save writes: its name, shape and payload size.
struct SavedFile {
  std::string name;
  std::vector<int64_t> shape;
  double bytes;
};

std::vector<SavedFile> inputs_to_save(const Problem& p) {
  const int64_t per_token = p.reduction == Reduction::kNone ? p.n : 1;
  const std::vector<int64_t> per_token_shape = p.reduction == Reduction::kNone ? std::vector<int64_t>{p.n}
                                                                               : std::vector<int64_t>{};
  return {{"e.npy", {p.n, p.d}, 4.0 * p.n * p.d},
          {"c.npy", {p.v, p.d}, 4.0 * p.v * p.d},
          {"targets.npy", {p.n}, 8.0 * p.n},
          {"dloss.npy", per_token_shape, 4.0 * per_token}};
}

std::vector<SavedFile> outputs_to_save(const Problem& p, bool backward) {
  const int64_t per_token = p.reduction == Reduction::kNone ? p.n : 1;
  const std::vector<int64_t> per_token_shape = p.reduction == Reduction::kNone ? std::vector<int64_t>{p.n}
                                                                               : std::vector<int64_t>{};
  std::vector<SavedFile> files = {{"loss.npy", per_token_shape, 4.0 * per_token}, {"lse.npy", {p.n}, 4.0 * p.n}};
  if (backward) {
    files.push_back({"de.npy", {p.n, p.d}, 4.0 * p.n * p.d});
    files.push_back({"dc.npy", {p.v, p.d}, 4.0 * p.v * p.d});
  }
  return files;
}

// "e.npy [77,2304] 709.6 kB, c.npy [256000,2304] 2.36 GB"
std::string describe_files(const std::vector<SavedFile>& files) {
  std::string text;
  for (const auto& f : files) {
    text += text.empty() ? "" : ", ";
    text += f.name + " [";
    for (size_t i = 0; i < f.shape.size(); ++i) text += (i ? "," : "") + std::to_string(f.shape[i]);
    text += "] " + format_size(f.bytes);
  }
  return text;
}

}  // namespace

void check_save_size(const std::string& dir, const Problem& p, bool backward, bool save_large, bool loaded) {
  std::vector<SavedFile> files = inputs_to_save(p);
  for (auto& f : outputs_to_save(p, backward)) files.push_back(f);
  double total = 0, largest = 0;
  std::string largest_name;
  for (const auto& f : files) {
    total += f.bytes;
    if (f.bytes > largest) largest = f.bytes, largest_name = f.name;
  }
  if (total > kSaveLimitBytes && !save_large)
    throw InputError("--save " + dir + " would write " + format_size(total) + " of .npy files (" + largest_name +
                     " alone " + format_size(largest) + " at " + p.describe() +
                     "); pass --save-large to write more than 1 GB" + (loaded ? "" : ", or choose smaller --n/--d/--v"));
}

namespace {

// --save into the --load directory would replace the user's inputs with the
// ones this run used (bf16-rounded with the default --dtype).
void check_save_is_not_load(const std::string& load, const std::string& save) {
  namespace fs = std::filesystem;
  std::error_code ec1, ec2, ec3;
  const fs::path a = fs::weakly_canonical(load, ec1), b = fs::weakly_canonical(save, ec2);
  const bool same = (!ec1 && !ec2 && a == b) || (fs::exists(save) && fs::equivalent(load, save, ec3) && !ec3);
  if (same)
    throw InputError("--save " + save + " is the --load directory: saving there would overwrite its inputs " +
                     "(bf16-rounded with --dtype bf16); save to another directory");
}

}  // namespace

void save_inputs_and_upstream(const std::string& program, const std::string& dir, const Problem& p,
                              const HostInputs& inputs, const std::vector<float>& upstream) {
  save_inputs(dir, inputs);
  write_upstream((std::filesystem::path(dir) / "dloss.npy").string(), p, upstream);
  std::printf("%s: saved %s in %s\n", program.c_str(), describe_files(inputs_to_save(p)).c_str(), dir.c_str());
}

void save_outputs(const std::string& program, const std::string& dir, const Problem& p, const HostOutputs& out) {
  namespace fs = std::filesystem;
  std::vector<int64_t> loss_shape;
  if (p.reduction == Reduction::kNone) loss_shape = {p.n};
  write_npy((fs::path(dir) / "loss.npy").string(), out.loss.data(), loss_shape);
  write_npy((fs::path(dir) / "lse.npy").string(), out.lse.data(), {p.n});
  if (!out.de.empty()) write_npy((fs::path(dir) / "de.npy").string(), out.de.data(), {p.n, p.d});
  if (!out.dc.empty()) write_npy((fs::path(dir) / "dc.npy").string(), out.dc.data(), {p.v, p.d});
  std::printf("%s: saved %s in %s\n", program.c_str(), describe_files(outputs_to_save(p, !out.de.empty())).c_str(),
              dir.c_str());
}

void add_file_options(OptionParser& parser, FileFlags* f) {
  parser.add_string("load", &f->load, "read e.npy, c.npy, targets.npy (and dloss.npy if present) from this directory");
  parser.add_string("save", &f->save, "write the inputs, dloss.npy and loss/lse/de/dc .npy to this directory");
  parser.add_flag("save-large", &f->save_large, "let --save write more than 1 GB");
}

void validate_file_flags(const OptionParser& parser, const FileFlags& f) {
  if (!f.load.empty() && (parser.was_set("n") || parser.was_set("d") || parser.was_set("v") || parser.was_set("data")))
    throw InputError("--load takes N, D and V from the files: drop --n, --d, --v and --data");
  if (!f.load.empty() && parser.was_set("ignore-frac"))
    throw InputError("--ignore-frac applies to generated data; with --load, mark ignored tokens in targets.npy");
  if (f.save_large && f.save.empty()) throw InputError("--save-large goes with --save DIR");
  if (!f.load.empty() && !f.save.empty()) check_save_is_not_load(f.load, f.save);
}

namespace {

int run(StageFactory factory, const std::string& program, int argc, char** argv) {
  std::unique_ptr<Stage> stage = factory();
  CommonFlags f;
  OptionParser parser(program);
  add_problem_options(parser, &f);
  parser.add_flag("backward", &f.backward, "also compute dE and dC");
  parser.add_string("upstream", &f.upstream,
                    "upstream gradient dloss of the backward: ones (default; as loss.backward()) or random "
                    "(seeded U(0.5,1.5) per token, --reduction none); with --load, DIR/dloss.npy if present");
  parser.add_flag("check", &f.check, "compare with the double-precision CPU reference");
  parser.add_int("iters", &f.iters, "timed iterations (median reported); 0 = no timing");
  add_file_options(parser, &f);
  stage->add_options(parser);
  if (!parser.parse(argc, argv)) return kExitOk;
  stage->validate_options();

  Problem p = f.problem();
  GeneratorOptions gen = f.generator();
  if (f.iters < 0) throw InputError("--iters must be >= 0");
  if (f.backward && !stage->has_backward())
    throw InputError("--backward: stage " + stage->name() + " computes the forward only (the backward comes in stage 06)");
  validate_file_flags(parser, f);
  validate_upstream_mode(f.upstream, p);
  p.validate();
  if (f.load.empty()) validate_generator_options(p, gen);
  if (f.load.empty() && !f.save.empty()) check_save_size(f.save, p, f.backward, f.save_large, false);

  HostInputs inputs;
  std::string source;
  if (!f.load.empty()) {
    inputs = load_inputs(f.load, p);
    source = "loaded from " + f.load;
    if (!f.save.empty()) check_save_size(f.save, p, f.backward, f.save_large, true);
  }
  const Upstream upstream = choose_upstream(f.upstream, p, f.load, gen.seed);
  std::string why;
  const GpuState gpu = probe_gpu(&why);
  // A GPU that is there but unusable is a failure, never a skip.
  if (gpu == GpuState::kBroken) {
    std::fprintf(stderr, "%s: CUDA error: %s\n", program.c_str(), why.c_str());
    return kExitCheckFailed;
  }
  const bool have_gpu = gpu == GpuState::kUsable;
  if (!have_gpu && f.save.empty()) {
    std::printf("%s: SKIPPED: %s\n", program.c_str(), why.c_str());
    return kExitSkipped;
  }
  if (f.load.empty()) {
    inputs = generate_inputs(p, gen);
    source = std::string(to_string(gen.mode)) + " data, seed " + std::to_string(f.seed);
  }
  if (!have_gpu) {
    save_inputs_and_upstream(program, f.save, p, inputs, upstream.values);
    std::printf("%s: SKIPPED: %s\n", program.c_str(), why.c_str());
    return kExitSkipped;
  }

  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s  %s  (%s)  on %s\n", program.c_str(), p.describe().c_str(), source.c_str(), prop.name);
  if (!f.save.empty()) save_inputs_and_upstream(program, f.save, p, inputs, upstream.values);
  if (f.backward) std::printf("  upstream     %s\n", upstream.description.c_str());

  StageRunner runner(*stage, p, inputs, upstream.values);
  runner.poison_outputs();
  if (f.backward)
    runner.forward_backward();
  else
    runner.forward();
  HostOutputs out = runner.download();

  print_loss(p, out.loss, inputs.targets);
  for (const auto& line : stage->report_lines()) std::printf("  %s\n", line.c_str());

  int status = kExitOk;
  if (f.check) {
    CheckReport report = check_outputs(p, inputs, out, upstream.values, f.backward, int64_t{1} << 26, 8,
                                       stage->gradient_approximation());
    std::printf("  check        %s\n", report.note.c_str());
    print_comparisons(report.comparisons);
    if (!report.passed()) status = kExitCheckFailed;
    std::printf("  check        %s\n", report.passed() ? "PASSED" : "FAILED");
  }
  if (!f.save.empty()) save_outputs(program, f.save, p, out);

  if (f.iters > 0) {
    double fwd = runner.time_forward_ms(static_cast<int>(f.iters));
    std::printf("  time         forward %.3f ms", fwd);
    if (f.backward) std::printf("   forward+backward %.3f ms", runner.time_forward_backward_ms(static_cast<int>(f.iters)));
    std::printf("   (median of %lld)\n", static_cast<long long>(f.iters));
  }
  // Both after the timed calls too: a stage that plans per batch (stage 10) may hold other items after its first.
  const size_t peak = runner.peak_beyond_inputs();
  std::vector<MemoryItem> model = runner.memory_model(f.backward);
  std::printf("  memory       peak %s beyond the inputs (inputs %s); model %s:", format_mb(peak).c_str(),
              format_mb(runner.input_bytes()).c_str(), format_mb(total_bytes(model)).c_str());
  for (const auto& item : model) std::printf(" %s %s,", item.first.c_str(), format_mb(item.second).c_str());
  std::printf(" cuBLAS workspace %s not included\n", format_mb(kCublasWorkspaceBytes).c_str());
  return status;
}

}  // namespace

void print_loss(const Problem& p, const std::vector<float>& loss, const std::vector<int64_t>& targets) {
  if (p.reduction == Reduction::kNone) {
    double sum = 0;
    for (float x : loss) sum += x;
    std::printf("  loss         none: %lld per-token values, their sum %.6f\n", static_cast<long long>(p.n), sum);
  } else {
    std::printf("  loss         %.6f (%s over %lld of %lld tokens)\n", loss[0], to_string(p.reduction),
                static_cast<long long>(count_valid_targets(p, targets)), static_cast<long long>(p.n));
  }
}

void print_comparisons(const std::vector<Comparison>& comparisons) {
  for (const auto& c : comparisons) {
    std::printf("    %s\n", c.summary().c_str());
    for (const auto& m : c.first_mismatches) std::printf("      %s\n", m.c_str());
  }
}

void add_problem_options(OptionParser& parser, ProblemFlags* f) {
  add_shape_options(parser, &f->n, &f->d, &f->v);
  parser.add_string("dtype", &f->dtype, "input dtype: bf16 or fp32");
  parser.add_int("seed", &f->seed, "seed of the generated inputs (and of --upstream random)");
  parser.add_string("data", &f->data, "generated inputs: random or realistic (LM-like softmax)");
  parser.add_double("ignore-frac", &f->ignore_frac, "share of targets set to ignore_index");
  parser.add_int("ignore-index", &f->ignore_index, "target value that marks an ignored token");
  parser.add_double("softcap", &f->softcap, "softcap s: logits -> s*tanh(logits/s); 0 = off");
  parser.add_string("reduction", &f->reduction, "mean, sum or none");
}

Problem ProblemFlags::problem() const {
  Problem p;
  p.n = n;
  p.d = d;
  p.v = v;
  p.dtype = parse_dtype(dtype);
  p.reduction = parse_reduction(reduction);
  p.ignore_index = ignore_index;
  p.softcap = static_cast<float>(softcap);
  return p;
}

GeneratorOptions ProblemFlags::generator() const {
  GeneratorOptions gen;
  gen.mode = parse_data_mode(data);
  gen.seed = static_cast<uint64_t>(seed);
  gen.ignore_fraction = ignore_frac;
  return gen;
}

int run_program(const std::string& program, const std::function<int()>& body) {
  const char* name = program.c_str();
  try {
    return body();
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

int run_stage_main(StageFactory factory, int argc, char** argv) {
  const std::string program = "stage" + factory()->name();
  return run_program(program, [&] { return run(factory, program, argc, argv); });
}

}  // namespace cce
