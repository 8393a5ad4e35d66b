// Host-side inputs: generated from a seed, or loaded from .npy files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"

namespace cce {

struct HostInputs {
  int64_t n = 0, d = 0, v = 0;
  std::vector<float> e;          // [N,D] row-major
  std::vector<float> c;          // [V,D] row-major
  std::vector<int64_t> targets;  // [N], in [0,V) or ignore_index
};

enum class DataMode { kRandom, kRealistic };
DataMode parse_data_mode(const std::string& text);  // "random" | "realistic"
const char* to_string(DataMode mode);

struct GeneratorOptions {
  DataMode mode = DataMode::kRealistic;
  uint64_t seed = 1234;
  double ignore_fraction = 0.0;  // share of targets replaced by ignore_index
};

// Plain random: E ~ N(0,1), C ~ N(0,1/D), so every logit is ~N(0,1) and the
// softmax is nearly flat; targets uniform over [0,V).
//
// Realistic: logits shaped like a trained LM's (see docs/README.md, "Data: the realistic generator"):
//   prior_j = −log(rank_j + 1), a Zipf(1) log-frequency over a random
//             permutation of the vocabulary, carried by channel 0
//             (E_i[0] = 8, C_j[0] = prior_j / 8);
//   noise     C_j[1:] ~ N(0, 1/(D−1)), E_i[1:] ~ N(0, 0.5²);
//   context   per token, 256 distinct entries drawn from the prior (V/4 if fewer), each with a
//             boost b ~ U(0,7) added to E_i[1:] along that entry's C row, so that
//             logit_ij ≈ prior_j + b (hidden state correlated with those rows);
//   targets   drawn from the softmax of these logits: exactly over the
//             context entries, and over the rest by resampling 64 candidates
//             drawn from the prior, weighted by exp(logit − prior) (computing
//             every logit on the CPU would be a full GEMM).
// Deterministic for a seed, independent of the number of threads used.
HostInputs generate_inputs(const Problem& problem, const GeneratorOptions& options);
// The checks generate_inputs makes first (InputError), to run before any work.
void validate_generator_options(const Problem& problem, const GeneratorOptions& options);

// Rounds every value to the nearest bf16 (ties to even), in place. Stages that
// run in bf16 see exactly these values, and so does the reference.
void round_to_bf16(std::vector<float>& values);
uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(uint16_t bits);

// Checks shapes and that every target is in [0,V) or equals ignore_index.
void validate_inputs(const Problem& problem, const HostInputs& inputs);

int64_t count_valid_targets(const Problem& problem, const std::vector<int64_t>& targets);

}  // namespace cce
