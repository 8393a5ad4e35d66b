// The command line every stage executable shares:
//   stageNN_name [--n --d --v --dtype bf16|fp32 --seed --data random|realistic
//                 --ignore-frac --ignore-index --softcap --reduction mean|sum|none
//                 --backward --upstream ones|random --check --iters
//                 --load DIR --save DIR --save-large] + stage flags
// The default problem is common/problem.h's kDefaultN/D/V.
// Exit codes: 0 success, 1 failed check, 2 bad input, 77 no CUDA device.
#pragma once

#include <functional>
#include <string>

#include "common/compare.h"
#include "common/stage.h"

namespace cce {

constexpr int kExitOk = 0;
constexpr int kExitCheckFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitSkipped = 77;  // ctest's SKIP_RETURN_CODE

struct HostOutputs;  // common/runner.h

int run_stage_main(StageFactory factory, int argc, char** argv);

// The problem's flags (--n --d --v --dtype --seed --data --ignore-frac
// --ignore-index --softcap --reduction), for programs with a driver of their
// own (stage 11) that take the same problem as every stage executable.
struct ProblemFlags {
  int64_t n = kDefaultN, d = kDefaultD, v = kDefaultV, seed = 1234, ignore_index = -100;
  std::string dtype = "bf16", data = "realistic", reduction = "mean";
  double ignore_frac = 0.0, softcap = 0.0;
  Problem problem() const;             // not yet validated
  GeneratorOptions generator() const;  // for generate_inputs
};
void add_problem_options(OptionParser& parser, ProblemFlags* flags);

// --load DIR, --save DIR and --save-large, for drivers of their own (stage 11)
// that read and write the same .npy files as every stage executable.
struct FileFlags {
  std::string load, save;
  bool save_large = false;
};
void add_file_options(OptionParser& parser, FileFlags* flags);
// What --load and --save refuse before any data is read: shape, --data or
// --ignore-frac flags beside --load, --save-large without --save, --save into
// the --load directory.
void validate_file_flags(const OptionParser& parser, const FileFlags& flags);
// A --save of more than 1 GB without --save-large (loaded: the shape came
// from --load's files, so smaller --n/--d/--v is no advice).
void check_save_size(const std::string& dir, const Problem& problem, bool backward, bool save_large, bool loaded);
// --save's files: the inputs and dloss.npy, then loss, LSE (and dE, dC).
void save_inputs_and_upstream(const std::string& program, const std::string& dir, const Problem& problem,
                              const HostInputs& inputs, const std::vector<float>& upstream);
void save_outputs(const std::string& program, const std::string& dir, const Problem& problem, const HostOutputs& out);

// The report lines every driver prints: the loss ("  loss  ..."), and each
// comparison with its first mismatches.
void print_loss(const Problem& problem, const std::vector<float>& loss, const std::vector<int64_t>& targets);
void print_comparisons(const std::vector<Comparison>& comparisons);

// Runs a program's body and turns its exceptions into one line on stderr and
// the exit codes above (bad input 2, CUDA or other errors 1): every
// executable of the repository (stages, tour, tools) ends this way.
int run_program(const std::string& program, const std::function<int()>& body);

// "1234.5 MB" (MB = 10^6 bytes, as in PyTorch's memory reports: MiB differ by 5%)
std::string format_mb(size_t bytes);

}  // namespace cce
