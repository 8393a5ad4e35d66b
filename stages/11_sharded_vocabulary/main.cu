// stage11_sharded_vocabulary: see README.md beside this file.
//   stage11_sharded_vocabulary [problem flags of every stage] [--load DIR] [--save DIR] [--save-large]
//       [--gpus P] [--backward] [--check] [--compare-single] [--iters K] [--json FILE] [--skip-missing-gpus]
//       [stage 10's flags]
// Its own driver: the stage table's interface holds the inputs on one GPU,
// this stage's live on P (E everywhere, C in shards).
#include <algorithm>
#include <cstdio>
#include <fstream>

#include "common/check.h"
#include "common/driver.h"
#include "common/npy.h"
#include "common/runner.h"
#include "common/upstream.h"
#include "stages/11_sharded_vocabulary/sharded_vocabulary.h"

namespace cce::s11 {
namespace {

struct Flags : ProblemFlags, FileFlags {
  int64_t gpus = 0, iters = 10;
  std::string upstream, json;
  bool backward = false, check = false, compare_single = false, skip_missing = false;
};

// P GPUs against stage 10 on one. Loss and LSE: the same numbers up to fp32
// rounding (the shards sum the exponentials in another order). One shard is
// stage 10 itself, called as here (forward, then backward): every output, dE
// and dC included, bit for bit.
std::vector<Comparison> compare_with_single(const HostOutputs& sharded, const HostOutputs& single, int gpus,
                                            const Problem& p) {
  const Tolerance tolerance = gpus == 1 ? Tolerance{0.0, 0.0} : Tolerance{1e-5, 1e-5};
  auto as_double = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  std::vector<Comparison> comparisons = {
      compare("loss vs stage 10 on one GPU", sharded.loss, as_double(single.loss), tolerance),
      compare("LSE vs stage 10 on one GPU", sharded.lse, as_double(single.lse), tolerance)};
  if (gpus == 1 && !sharded.de.empty()) {
    comparisons.push_back(compare("dE vs stage 10 (bitwise)", sharded.de, as_double(single.de), tolerance, p.d));
    comparisons.push_back(compare("dC vs stage 10 (bitwise)", sharded.dc, as_double(single.dc), tolerance, p.d));
  }
  return comparisons;
}

// The eps and the plan of the first step here against stage 10's on one GPU: the same (P=1:
// every statistic bitwise too). Across P the shards' tiles are not one GPU's,
// so the joined statistics differ a little; the choice they lead to must not.
bool same_choice(const s10::EpsChoice& here, const s10::PlanChoice& ran, const s10::PlanPerBatchStage& single,
                 int gpus) {
  const s10::EpsChoice there = single.eps_choice();
  const s10::PlanChoice single_ran = single.plan_choice();
  bool same = here.eps == there.eps && ran.plan == single_ran.plan;
  if (gpus == 1)
    same = same && here.misplaced_mass == there.misplaced_mass && here.candidates == there.candidates &&
           ran.kept_fraction == single_ran.kept_fraction;
  auto describe = [](const s10::EpsChoice& eps, const s10::PlanChoice& plan) {
    if (plan.kept_fraction < 0.0) return std::string("dense, every pair (--plan dense)");
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s at %s, %.2f%% of the pairs kept", s10::to_string(plan.plan),
                  s10::describe_eps(eps.eps).c_str(), 100.0 * plan.kept_fraction);
    return std::string(buf);
  };
  std::printf("  plan         here: %s; stage 10: %s: %s\n", describe(here, ran).c_str(),
              describe(there, single_ran).c_str(),
              same ? (gpus == 1 ? "the same, every statistic bitwise" : "the same eps and plan") : "DIFFERENT");
  return same;
}

// P GPUs' dE and dC against stage 10's on one: each is within the reference's
// bound at the same eps and plan, so they are within twice it of each other.
std::vector<Comparison> compare_gradients_within_bound(const Problem& p, const HostInputs& inputs,
                                                       const std::vector<float>& upstream, const HostOutputs& sharded,
                                                       const HostOutputs& single, GradientApproximation approximation) {
  ReferenceOptions opt;
  opt.backward = true;
  opt.upstream = upstream;
  opt.bounds = true;
  opt.approximation = approximation;
  const ReferenceResult ref = reference_cross_entropy(p, inputs, opt);
  auto twice = [](std::vector<double> bound) {
    for (double& b : bound) b *= 2.0;
    return bound;
  };
  auto as_double = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  return {compare("dE vs stage 10 (within twice the reference's bound)", sharded.de, as_double(single.de),
                  twice(ref.de_bound), 2.0 * ref.output_rtol, p.d),
          compare("dC vs stage 10 (within twice the reference's bound)", sharded.dc, as_double(single.dc),
                  twice(ref.dc_bound), 2.0 * ref.output_rtol, p.d)};
}

// What the backward chose, in stage 10's words, and from what.
void print_choice(const ShardedVocabulary& sharded, const s10::PlanPerBatchStage& flags, Dtype dtype, int gpus) {
  const s10::DropSettings settings = flags.settings(dtype);
  const s10::EpsChoice eps = sharded.eps_choice();
  const s10::PlanChoice ran = sharded.plan_choice();
  if (ran.plan == s10::BackwardPlan::kDense && ran.kept_fraction < 0.0) {
    std::printf("  drop         none: --plan dense recomputes every pair\n");
  } else if (ran.before_forward) {
    std::printf("  drop         none: the dense plan computes every pair\n");
  } else {
    std::string rule = s10::describe_eps(eps.eps);
    if (settings.misplaced_mass > 0.0) rule += s10::describe_automatic_eps(eps, settings.misplaced_mass);
    std::printf("  drop         %s; tail correction %s; token blocks %s\n", rule.c_str(),
                !settings.correct_tail ? "off" : !settings.correct_dc ? "of dE" : "of dE and dC",
                settings.group_tokens ? "of grouped rows (each shard its own)" : "in row order");
    if (eps.misplaced_mass >= 0.0) std::printf("  %s\n", s10::describe_candidates(eps).c_str());
  }
  std::printf("  %s\n", s10::describe_plan(ran, settings.plan, "on a sample (its forward on every shard, then the "
                                                                  "joined decision)").c_str());
  if (ran.before_forward)
    std::printf("  joined       per chunk of rows: the target logit's parts, each shard's LSE, dE's fp32 rows, by "
                "all-reduce over %d shard%s\n", gpus, gpus == 1 ? "" : "s");
  else if (ran.kept_fraction >= 0.0) {
    const s10::KeptPairs joined = sharded.joined_kept_pairs();
    std::printf("  joined       chosen once from the statistics of %d shard%s, summed by all-reduce: %s%lld of "
                "%lld pairs kept; the same choice on every GPU\n",
                gpus, gpus == 1 ? "" : "s", eps.misplaced_mass >= 0.0 ? "the misplaced mass per eps, then " : "",
                static_cast<long long>(joined.kept), static_cast<long long>(joined.pairs));
  }
}

std::string json_numbers(const std::vector<double>& values, int decimals) {
  std::string text = "[";
  char buf[48];
  for (size_t i = 0; i < values.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s%.*f", i ? ", " : "", decimals, values[i]);
    text += buf;
  }
  return text + "]";
}

std::string json_sizes(const std::vector<size_t>& bytes) {  // in MB
  std::vector<double> mb;
  for (const size_t b : bytes) mb.push_back(static_cast<double>(b) / 1e6);
  return json_numbers(mb, 6);
}

int run(int argc, char** argv) {
  const std::string program = "stage11_sharded_vocabulary";
  Flags f;
  s10::PlanPerBatchStage drop_stage;  // its flags are this stage's: the same backward per shard
  OptionParser parser(program);
  add_problem_options(parser, &f);
  parser.add_int("gpus", &f.gpus, "GPUs P, each holding V/P rows of C; 0 = every GPU here");
  parser.add_flag("skip-missing-gpus", &f.skip_missing,
                  "report SKIPPED (exit 77) instead of a bad-input error when fewer GPUs than --gpus are here");
  parser.add_flag("backward", &f.backward, "also compute dE (on every GPU) and dC (each GPU its shard)");
  parser.add_string("upstream", &f.upstream, "upstream gradient: ones (default) or random (--reduction none)");
  parser.add_flag("check", &f.check,
                  "compare with the double-precision CPU reference, the GPUs with each other, and two runs bitwise");
  parser.add_flag("compare-single", &f.compare_single,
                  "also run stage 10 on GPU 0 alone: loss and LSE compared, and its time beside this one's");
  parser.add_int("iters", &f.iters, "timed steps (median reported); 0 = no timing");
  parser.add_string("json", &f.json, "write the measurements to this file");
  add_file_options(parser, &f);
  drop_stage.add_options(parser);
  if (!parser.parse(argc, argv)) return kExitOk;
  drop_stage.validate_options();
  validate_file_flags(parser, f);

  Problem p = f.problem();
  GeneratorOptions gen = f.generator();
  if (f.iters < 0) throw InputError("--iters must be >= 0");
  validate_upstream_mode(f.upstream, p);
  // With --load the shape comes from the files' headers, so that the shard
  // count is checked against it before the data is read.
  if (!f.load.empty()) peek_inputs(f.load, &p.n, &p.d, &p.v);
  p.validate();
  if (f.load.empty()) validate_generator_options(p, gen);
  if (f.gpus < 0) throw InputError("--gpus must be at least 1, or 0 for every GPU here (got " + std::to_string(f.gpus) + ")");
  if (f.gpus > 0) validate_shard_count(p, f.gpus);
  if (!f.save.empty()) check_save_size(f.save, p, f.backward, f.save_large, !f.load.empty());
  // Inputs are read before the GPU probe, as every stage executable does: a
  // bad file is bad input on any machine.
  HostInputs inputs;
  std::string source = std::string(to_string(gen.mode)) + " data, seed " + std::to_string(f.seed);
  if (!f.load.empty()) {
    inputs = load_inputs(f.load, p);
    source = "loaded from " + f.load;
  }
  const Upstream upstream = choose_upstream(f.upstream, p, f.load, gen.seed);

  std::string why;
  const GpuState gpu = probe_gpu(&why);
  if (gpu == GpuState::kBroken) {  // a GPU that CUDA cannot use is an error, not a skip
    std::fprintf(stderr, "%s: CUDA error: %s\n", program.c_str(), why.c_str());
    return kExitCheckFailed;
  }
  if (gpu == GpuState::kMissing) {
    std::printf("%s: SKIPPED: %s\n", program.c_str(), why.c_str());
    return kExitSkipped;
  }
  int present = 0;
  CCE_CUDA_CHECK(cudaGetDeviceCount(&present));
  const int gpus = f.gpus == 0 ? present : static_cast<int>(f.gpus);
  if (f.skip_missing && gpus > present) {
    std::printf("%s: SKIPPED: needs %d GPUs, this machine has %d\n", program.c_str(), gpus, present);
    return kExitSkipped;
  }
  validate_shards(p, gpus, present);

  if (f.load.empty()) inputs = generate_inputs(p, gen);
  // Stage 10's settings on every shard (and for --compare-single's stage 10):
  // its automatic eps and plan are chosen once, from the shards' joined statistics.
  const ShardOptions options{drop_stage.settings(p.dtype), [&](const Problem& shard) { return drop_stage.plan_for(shard); }};
  ShardedVocabulary sharded(p, inputs, upstream.values, gpus, options);
  cudaDeviceProp prop{};
  CCE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s  %s  (%s)  on %d x %s\n", program.c_str(), p.describe().c_str(), source.c_str(), gpus, prop.name);
  if (!f.save.empty()) save_inputs_and_upstream(program, f.save, p, inputs, upstream.values);
  for (int g = 0; g < gpus; ++g)
    std::printf("  shard %d      GPU %d: rows [%lld, %lld) of C\n", g, g, static_cast<long long>(sharded.shard(g).begin),
                static_cast<long long>(sharded.shard(g).end));

  sharded.poison_outputs();
  if (f.backward)
    sharded.forward_backward();
  else
    sharded.forward();
  const HostOutputs out = sharded.download();
  const std::vector<size_t> peaks = sharded.peak_beyond_inputs();
  std::vector<size_t> models;  // of this first step
  for (int g = 0; g < gpus; ++g) models.push_back(total_bytes(sharded.memory_model(g, f.backward)));
  print_loss(p, out.loss, inputs.targets);
  const s10::DropStats drop = sharded.drop_stats();
  if (f.backward && drop.tiles > 0)
    std::printf("  kept tiles   %lld of %lld (%.2f%%) over the shards, in %lld backward chunks\n",
                static_cast<long long>(drop.kept_tiles), static_cast<long long>(drop.tiles),
                100.0 * static_cast<double>(drop.kept_tiles) / static_cast<double>(drop.tiles),
                static_cast<long long>(drop.chunks));
  if (f.backward) print_choice(sharded, drop_stage, p.dtype, gpus);
  // What the backward left out on purpose: with the dense plan, nothing beyond the arithmetic (stage 10's words).
  auto approximation_of = [&](const s10::PlanChoice& ran, const s10::EpsChoice& eps) {
    return f.backward && ran.plan == s10::BackwardPlan::kDense
               ? s10::dense_plan_approximation(ran)
               : GradientApproximation{f.backward ? eps.eps : options.drop.eps, options.drop.correct_tail};
  };
  const s10::PlanChoice first_plan = sharded.plan_choice();  // --check's later steps may plan otherwise
  const s10::EpsChoice first_eps = sharded.eps_choice();
  const GradientApproximation approximation = approximation_of(first_plan, first_eps);

  int status = kExitOk;
  auto report = [&](const std::vector<Comparison>& comparisons) {
    print_comparisons(comparisons);
    for (const auto& c : comparisons)
      if (!c.passed()) status = kExitCheckFailed;
  };
  // One step's outputs against the reference, and its replicas against each other (`step`: "" or "step 2: ").
  auto check_step = [&](const HostOutputs& outputs, bool backward, const GradientApproximation& approx,
                        const char* step) {
    const CheckReport check = check_outputs(p, inputs, outputs, upstream.values, backward, int64_t{1} << 26, 8, approx);
    std::printf("  check        %s%s\n", step, check.note.c_str());
    report(check.comparisons);
    const bool agree = sharded.replicas_agree(backward) && (!backward || sharded.choices_agree());
    std::printf("  replicas     %sloss, LSE%s bitwise equal on every GPU: %s\n", step,
                backward ? ", dE, the eps and the plan" : "", agree ? "yes" : "NO");
    if (!agree) status = kExitCheckFailed;
  };
  if (f.check) {
    check_step(out, f.backward, approximation, "");
    bool modelled = true;  // the tracker's peak beyond the inputs, to the byte
    for (int g = 0; g < gpus; ++g) modelled = modelled && peaks[g] == models[g];
    std::printf("  memory       step 1's peak on every GPU is its memory model: %s\n", modelled ? "yes" : "NO");
    if (!modelled) status = kExitCheckFailed;
    if (f.backward) sharded.forward_backward(); else sharded.forward();
    HostOutputs again = sharded.download();
    HostOutputs compared_with = out;
    int steps = 2;
    if (f.backward && sharded.plan_choice().before_forward != first_plan.before_forward) {
      // As stage 10 plans a batch from the one before: this second step ran the dense plan before the
      // forward. It is checked too, and a third step, planned as it was, against it bitwise.
      const s10::PlanChoice second = sharded.plan_choice();
      std::printf("  step 2       planned from step 1: %s\n", s10::describe_plan(second, options.drop.plan).c_str());
      check_step(again, true, approximation_of(second, sharded.eps_choice()), "step 2: ");
      compared_with = std::move(again);
      sharded.forward_backward();
      again = sharded.download();
      steps = 3;
    }
    auto bitwise_equal = [](const HostOutputs& a, const HostOutputs& b) {
      return a.loss == b.loss && a.lse == b.lse && a.de == b.de && a.dc == b.dc;
    };
    const bool same = bitwise_equal(again, compared_with);
    std::printf("  run twice    bitwise equal: %s\n", same ? "yes" : "NO");
    if (!same) status = kExitCheckFailed;
    if (f.backward && sharded.plan_choice().before_forward && options.drop.plan == s10::BackwardPlan::kAuto) {
      // On through the run of dense steps to the one that decides again on a sample of rows (stage 10's
      // kDecideEveryBatches): planned dense again, it gives the first dense step's bits; else it is checked.
      int step = steps;
      for (;;) {
        const s10::PlanChoice now = sharded.plan_choice();
        if (now.sample_rows > 0 || !now.before_forward || step > s10::kDecideEveryBatches) break;
        sharded.forward_backward();
        ++step;
      }
      const s10::PlanChoice sampled = sharded.plan_choice();
      std::printf("  step %-7d %s\n", step, s10::describe_plan(sampled, options.drop.plan).c_str());
      const HostOutputs last = sharded.download();
      const std::string label = "step " + std::to_string(step) + ": ";
      if (sampled.sample_rows == 0 && sampled.before_forward) {
        std::printf("  sample       no step up to %d decided on a sample: NO\n", step);
        status = kExitCheckFailed;
      } else if (sampled.before_forward) {
        const bool same_bits = bitwise_equal(last, compared_with);
        std::printf("  sample       step %d decided on %lld rows and stayed dense: bitwise equal to the first dense "
                    "step: %s\n", step, static_cast<long long>(sampled.sample_rows), same_bits ? "yes" : "NO");
        if (!same_bits || !sharded.replicas_agree(true) || !sharded.choices_agree()) status = kExitCheckFailed;
        // The sample's scratch stays beside the dense plan's: the peak so far is step 1's model or this step's.
        const std::vector<size_t> peaks_now = sharded.peak_beyond_inputs();
        bool sample_modelled = true;
        for (int g = 0; g < gpus; ++g)
          sample_modelled = sample_modelled &&
                            peaks_now[g] == std::max(models[g], total_bytes(sharded.memory_model(g, true)));
        std::printf("  memory       steps 1 to %d peak on every GPU at the larger of step 1's model and step %d's: %s\n",
                    step, step, sample_modelled ? "yes" : "NO");
        if (!sample_modelled) status = kExitCheckFailed;
      } else {  // the sample decided sparse: this step decided on the whole batch after its forward
        check_step(last, true, approximation_of(sampled, sharded.eps_choice()), label.c_str());
      }
    }
  }

  // The shards' steps timed first, so that every step's peak is theirs: --compare-single then runs stage 10 on GPU 0.
  ShardedVocabulary::StepTimes steps_ms;
  double nccl_ms = 0.0;
  if (f.iters > 0) {
    steps_ms = f.backward ? sharded.time_forward_backward_ms(static_cast<int>(f.iters))
                          : sharded.time_forward_ms(static_cast<int>(f.iters));
    nccl_ms = sharded.last_nccl_ms();
  }
  const double step_ms = steps_ms.median_ms;
  const std::vector<size_t> every_step = sharded.peak_beyond_inputs();

  double single_ms = 0.0;
  if (f.compare_single) {
    StageRunner single(drop_stage, p, inputs, upstream.values);
    single.poison_outputs();
    // As the shards ran: the forward then the backward, or loss and gradient together (the dense plan before the forward).
    if (f.backward && first_plan.before_forward)
      single.forward_backward();
    else if (f.backward)
      single.forward_then_backward();
    else
      single.forward();
    std::printf("  one GPU      stage 10 on GPU 0 alone:\n");
    const HostOutputs single_out = single.download();
    report(compare_with_single(out, single_out, gpus, p));
    if (f.backward) {
      if (!same_choice(first_eps, first_plan, drop_stage, gpus)) status = kExitCheckFailed;
      if (gpus > 1 && f.check && p.n * p.v <= (int64_t{1} << 26))
        report(compare_gradients_within_bound(p, inputs, upstream.values, out, single_out, approximation));
    }
    if (f.iters > 0)
      single_ms = f.backward ? single.time_forward_backward_ms(static_cast<int>(f.iters))
                             : single.time_forward_ms(static_cast<int>(f.iters));
  }
  if (f.check || f.compare_single) std::printf("  check        %s\n", status == kExitOk ? "PASSED" : "FAILED");
  if (!f.save.empty()) save_outputs(program, f.save, p, out);

  if (f.iters > 0) {
    std::printf("  time         %s %.3f ms on %d GPU%s (median of %lld, wall clock); in NCCL on GPU 0 %.3f ms (%.1f%%)\n",
                f.backward ? "forward+backward" : "forward", step_ms, gpus, gpus == 1 ? "" : "s",
                static_cast<long long>(f.iters), nccl_ms, 100.0 * nccl_ms / step_ms);
    if (f.backward)
      std::printf("  time         steps' mean %.3f ms, slowest %.3f (a dense run's every %dth step decides again)\n",
                  steps_ms.mean_ms, steps_ms.max_ms, s10::kDecideEveryBatches);
    if (single_ms > 0)
      std::printf("  time         stage 10 on one GPU %.3f ms: %.2fx faster on %d\n", single_ms, single_ms / step_ms, gpus);
  }
  // The first step's peak and model; the timed steps may plan otherwise (the dense plan before the forward).
  for (int g = 0; g < gpus; ++g)
    std::printf("  memory       GPU %d: peak %s beyond its inputs (inputs %s); model %s; every step's peak %s\n", g,
                format_mb(peaks[g]).c_str(), format_mb(sharded.input_bytes()[g]).c_str(), format_mb(models[g]).c_str(),
                format_mb(every_step[g]).c_str());

  if (!f.json.empty()) {
    std::ofstream json(f.json);
    if (!json) throw InputError("--json " + f.json + ": cannot write this file");
    json << "{\n  \"stage\": \"11_sharded_vocabulary\",\n  \"gpu\": \"" << prop.name << "\",\n  \"gpus\": " << gpus
         << ",\n  \"problem\": \"" << p.describe() << "\",\n  \"n\": " << p.n << ", \"d\": " << p.d << ", \"v\": " << p.v
         << ",\n  \"data\": \"" << (f.load.empty() ? to_string(gen.mode) : "loaded") << "\",\n  \"backward\": " << (f.backward ? "true" : "false")
         << ",\n  \"iters\": " << f.iters << ",\n  \"step_ms\": " << step_ms << ", \"step_mean_ms\": " << steps_ms.mean_ms
         << ", \"step_max_ms\": " << steps_ms.max_ms << ",\n  \"step_ms_each\": " << json_numbers(steps_ms.each_ms, 4)
         << ",\n  \"nccl_ms\": " << nccl_ms
         << ",\n  \"stage10_one_gpu_ms\": " << single_ms << ",\n  \"plan\": \""
         << (f.backward ? s10::to_string(sharded.plan_choice().plan) : "none") << "\", \"dense_before_forward\": "
         << (f.backward && sharded.plan_choice().before_forward ? "true" : "false") << ", \"eps\": "
         << (f.backward ? sharded.eps_choice().eps : 0.0f) << ",\n  \"kept_tiles\": " << drop.kept_tiles
         << ", \"tiles\": " << drop.tiles << ",\n  \"peak_MB_per_gpu\": " << json_sizes(peaks)
         << ", \"peak_MB_per_gpu_every_step\": " << json_sizes(every_step)
         << ",\n  \"input_MB_per_gpu\": " << json_sizes(sharded.input_bytes()) << ",\n  \"commit\": \""
         << (std::getenv("CCE_COMMIT") ? std::getenv("CCE_COMMIT") : "unknown") << "\"\n}\n";
  }
  return status;
}

}  // namespace
}  // namespace cce::s11

int main(int argc, char** argv) {
  return cce::run_program("stage11_sharded_vocabulary", [&] { return cce::s11::run(argc, argv); });
}
