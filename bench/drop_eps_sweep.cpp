// Stage 10's accuracy against its threshold: for each shape, the fp32
// reference (stage 01 on the same bf16-valued inputs in fp32, as cce_bench),
// then stage 10 at eps = 2^-e for each e, with and without the tail
// correction, and with every tile kept: kept fraction, relative L2 error of
// dE and dC, loss+grad time (median). Writes one JSON (docs/drop_eps_sweep.json).
// gemma2_random is gemma2's shape on flat (random) data; the exponent "auto"
// runs the automatic eps (its row records the exponent it took). An exponent
// lies on stage 10's grid of candidates (kAutoStepsPerExponent: quarters).
//
// Usage: drop_eps_sweep [--shapes=gpt2,llama3,gemma2,gemma2_random,lm32k,lm128k] [--lm-data=DIR]
//                       [--exponents=auto,6,8,10,12,12.75,14,16,18,20] [--corrections=dE+dC,dE,none]
//                       [--iters=K] [--out=FILE]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/host_data.h"
#include "common/npy.h"
#include "common/runner.h"
#include "common/stage_table.h"
#include "stages/10_plan_per_batch/plan_per_batch.h"

namespace cce {
namespace {

struct Shape {
  std::string name;
  int64_t n, d, v;
  bool from_files;
  DataMode data = DataMode::kRealistic;
};
const Shape kShapes[] = {{"gpt2", 20480, 768, 50257, false},
                         {"llama3", 8192, 4096, 128256, false},
                         {"gemma2", 8192, 2304, 256000, false},
                         {"gemma2_random", 8192, 2304, 256000, false, DataMode::kRandom},
                         {"lm32k", 0, 0, 0, true},
                         {"lm128k", 0, 0, 0, true}};
constexpr double kAutomatic = -1.0;  // an "exponent" that runs the automatic eps

double rel_l2(const std::vector<float>& x, const std::vector<float>& ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double diff = static_cast<double>(x[i]) - ref[i];
    num += diff * diff;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  return den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int run(int argc, char** argv) {
  std::string shapes_text = "gpt2,llama3,gemma2", lm_data = "/tmp/cce-lm-data", out_path = "docs/drop_eps_sweep.json";
  std::string exponents_text = "6,8,10,12,14,16,18,20", corrections_text = "dE+dC,dE,none";
  int iters = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* key) -> const char* {
      const std::string prefix = std::string(key) + "=";
      return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    const char* shapes_v = value("--shapes");
    const char* lm_v = value("--lm-data");
    const char* exp_v = value("--exponents");
    const char* out_v = value("--out");
    const char* iters_v = value("--iters");
    const char* corrections_v = value("--corrections");
    if (shapes_v) shapes_text = shapes_v;
    else if (lm_v) lm_data = lm_v;
    else if (exp_v) exponents_text = exp_v;
    else if (out_v) out_path = out_v;
    else if (iters_v) iters = std::atoi(iters_v);
    else if (corrections_v) corrections_text = corrections_v;
    else throw InputError("unknown argument '" + arg + "' (see the usage at the top of bench/drop_eps_sweep.cpp)");
  }
  if (iters < 1) throw InputError("--iters must be >= 1");
  std::vector<double> exponents;
  for (const std::string& e : split(exponents_text)) {
    if (e == "auto") {
      exponents.push_back(kAutomatic);
      continue;
    }
    char* end = nullptr;
    const double x = std::strtod(e.c_str(), &end);
    const double steps = s10::kAutoStepsPerExponent;  // stage 10's grid: its candidates' exponents
    if (end == e.c_str() || *end != '\0' || !(x >= 1.0 && x <= 40.0) || steps * x != std::floor(steps * x)) {
      char step[16];
      std::snprintf(step, sizeof step, "%g", 1.0 / steps);
      throw InputError("--exponents: each auto or a multiple of " + std::string(step) + " in 1..40, not '" + e + "'");
    }
    exponents.push_back(x);
  }
  std::vector<std::string> corrections = split(corrections_text);
  for (const std::string& c : corrections)
    if (c != "dE+dC" && c != "dE" && c != "none") throw InputError("--corrections: each of dE+dC, dE, none");
  std::string why;
  if (probe_gpu(&why) == GpuState::kBroken) {
    std::fprintf(stderr, "drop_eps_sweep: CUDA error: %s\n", why.c_str());
    return 1;
  }
  if (!cuda_device_available(&why)) {
    std::fprintf(stderr, "drop_eps_sweep: no CUDA device (%s)\n", why.c_str());
    return 77;
  }
  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));

  std::ostringstream json;
  json << "{\n  \"context\": {\"gpu\": \"" << prop.name << "\", \"date\": \"" << date
       << "\", \"what\": \"stage 10 loss+grad at eps = 2^-e, bf16, mean reduction, upstream ones; errors: relative L2 "
          "against stage 01 in fp32 on the same inputs\"},\n  \"shapes\": [";
  bool first_shape = true;
  for (const std::string& name : split(shapes_text)) {
    const Shape* shape = nullptr;
    for (const Shape& s : kShapes)
      if (s.name == name) shape = &s;
    if (shape == nullptr) throw InputError("unknown shape '" + name + "'");
    Problem p;
    p.dtype = Dtype::kBFloat16;
    p.reduction = Reduction::kMean;
    HostInputs in;
    if (shape->from_files) {
      try {
        in = load_inputs(lm_data + "/" + name, p);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "drop_eps_sweep: %s skipped: %s\n", name.c_str(), e.what());
        continue;
      }
    } else {
      p.n = shape->n, p.d = shape->d, p.v = shape->v;
      GeneratorOptions gen;  // cce_bench's seed
      gen.seed = 1234;
      gen.mode = shape->data;
      in = generate_inputs(p, gen);
    }
    const std::vector<float> upstream = ones_upstream(p);
    // The fp32 reference.
    HostOutputs ref;
    {
      Problem p32 = p;
      p32.dtype = Dtype::kFloat32;
      auto reference = all_stages().at(0)();
      StageRunner runner(*reference, p32, in, upstream);
      runner.forward_backward();
      ref = runner.download();
    }
    std::printf("%s N=%lld D=%lld V=%lld\n", name.c_str(), static_cast<long long>(p.n), static_cast<long long>(p.d),
                static_cast<long long>(p.v));
    json << (first_shape ? "" : ",") << "\n    {\"name\": \"" << name << "\", \"n\": " << p.n << ", \"d\": " << p.d
         << ", \"v\": " << p.v << ", \"data\": \"" << to_string(shape->data) << "\", \"rows\": [";
    first_shape = false;
    struct Setting {
      double exponent;         // 0: every tile kept; kAutomatic: the automatic eps
      std::string correction;  // "dE+dC", "dE", "none"
    };
    std::vector<Setting> settings = {{0, "none"}};
    for (const std::string& c : corrections)
      for (double e : exponents) settings.push_back({e, c});
    bool first_row = true;
    for (const Setting& s : settings) {
      s10::PlanPerBatchStage stage;
      OptionParser parser("drop_eps_sweep");
      stage.add_options(parser);
      char eps_text[32];  // 2^-e to the last bit: the flag's float is the nearest to it, as candidate_eps's
      std::snprintf(eps_text, sizeof eps_text, "%.17g", std::exp2(-s.exponent));
      std::vector<const char*> flags = {"drop_eps_sweep"};
      if (s.exponent == 0) {
        flags.push_back("--keep-all");
      } else {
        if (s.exponent != kAutomatic) {
          flags.push_back("--drop-eps");
          flags.push_back(eps_text);
        }
        if (s.correction == "none") flags.push_back("--no-correction");
        if (s.correction == "dE") flags.push_back("--no-dc-correction");
      }
      if (!parser.parse(static_cast<int>(flags.size()), const_cast<char**>(flags.data())))
        throw InputError("stage 10 refused its flags");
      stage.validate_options();
      StageRunner runner(stage, p, in, upstream);
      runner.poison_outputs();
      runner.forward_backward();
      const HostOutputs out = runner.download();
      const s10::DropStats st = stage.stats();
      const double kept = st.tiles > 0 ? static_cast<double>(st.kept_tiles) / static_cast<double>(st.tiles) : 1.0;
      const double ms = runner.time_forward_backward_ms(iters, 1);
      const double de_err = rel_l2(out.de, ref.de), dc_err = rel_l2(out.dc, ref.dc);
      const bool automatic = s.exponent == kAutomatic;
      const int candidate = automatic ? s10::candidate_index(stage.eps_choice().eps) : -1;
      const double exponent = !automatic       ? s.exponent
                              : candidate >= 0 ? -s10::candidate_log2_eps(candidate)
                                               : -std::log2(static_cast<double>(stage.eps_choice().eps));
      char exponent_text[16];
      std::snprintf(exponent_text, sizeof exponent_text, "%g", exponent);
      const std::string eps_name =
          exponent == 0.0 ? "none" : "2^-" + std::string(exponent_text) + (automatic ? " auto" : "");
      std::printf("  eps %-14s correction %-5s kept %6.2f%%  dE %.3e  dC %.3e  %.2f ms\n", eps_name.c_str(),
                  s.correction.c_str(), 100.0 * kept, de_err, dc_err, ms);
      std::fflush(stdout);
      json << (first_row ? "" : ",") << "\n      {\"eps_exponent\": " << exponent_text;
      if (automatic) json << ", \"automatic\": true, \"misplaced_mass\": " << stage.eps_choice().misplaced_mass;
      json << ", \"correction\": \"" << s.correction << "\", \"kept_frac\": " << kept
           << ", \"dE_rel_err\": " << de_err << ", \"dC_rel_err\": " << dc_err << ", \"loss_grad_ms\": " << ms << "}";
      first_row = false;
    }
    json << "\n    ]}";
  }
  json << "\n  ]\n}\n";
  std::ofstream(out_path) << json.str();
  std::printf("wrote %s\n", out_path.c_str());
  return 0;
}

}  // namespace
}  // namespace cce

int main(int argc, char** argv) {
  try {
    return cce::run(argc, argv);
  } catch (const cce::InputError& e) {
    std::fprintf(stderr, "drop_eps_sweep: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "drop_eps_sweep: error: %s\n", e.what());
    return 1;
  }
}
