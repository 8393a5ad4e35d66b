#include "common/host_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <thread>

#include "common/check.h"

namespace cce {
namespace {

// splitmix64: a small, fast generator; one stream per row so that the data do
// not depend on how rows are split among threads.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : state_(seed * 0x9E3779B97F4A7C15ull ^ (stream + 1) * 0xD1B54A32D192ED03ull) {
    next_u64();
  }
  uint64_t next_u64() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next_u64() >> 11) * 0x1.0p-53; }  // [0,1)
  double normal() {                                            // Box-Muller
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = 1.0 - uniform(), u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Distinct stream ids for the tensors drawn from one seed.
constexpr uint64_t kStreamE = 1ull << 40, kStreamC = 2ull << 40, kStreamT = 3ull << 40, kStreamPerm = 4ull << 40,
                   kStreamIgnore = 5ull << 40;

void parallel_rows(int64_t rows, const std::function<void(int64_t, int64_t)>& body) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t workers = std::min<int64_t>(hw, std::max<int64_t>(1, rows / 64));
  if (workers <= 1) {
    body(0, rows);
    return;
  }
  std::vector<std::thread> threads;
  int64_t chunk = (rows + workers - 1) / workers;
  for (int64_t w = 0; w < workers; ++w) {
    int64_t begin = w * chunk, end = std::min(rows, begin + chunk);
    if (begin < end) threads.emplace_back(body, begin, end);
  }
  for (auto& t : threads) t.join();
}

void generate_random(const Problem& p, uint64_t seed, HostInputs& out) {
  const double c_scale = 1.0 / std::sqrt(static_cast<double>(p.d));
  parallel_rows(p.n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      Rng rng(seed, kStreamE + i);
      for (int64_t k = 0; k < p.d; ++k) out.e[i * p.d + k] = static_cast<float>(rng.normal());
    }
  });
  parallel_rows(p.v, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      Rng rng(seed, kStreamC + j);
      for (int64_t k = 0; k < p.d; ++k) out.c[j * p.d + k] = static_cast<float>(c_scale * rng.normal());
    }
  });
  Rng rng(seed, kStreamT);
  for (int64_t i = 0; i < p.n; ++i) out.targets[i] = static_cast<int64_t>(rng.next_u64() % p.v);
}

constexpr int64_t kContextTokens = 256;
constexpr int kResampleCandidates = 64;
constexpr double kMaxBoost = 7.0;
constexpr double kHiddenNoise = 0.5;
constexpr double kPriorChannel = 8.0;

void generate_realistic(const Problem& p, uint64_t seed, HostInputs& out) {
  const int64_t V = p.v, D = p.d;
  // Vocabulary entry token_of_rank[r] has frequency rank r.
  std::vector<int64_t> token_of_rank(V);
  std::iota(token_of_rank.begin(), token_of_rank.end(), 0);
  Rng perm_rng(seed, kStreamPerm);
  for (int64_t r = V - 1; r > 0; --r) std::swap(token_of_rank[r], token_of_rank[perm_rng.next_u64() % (r + 1)]);
  std::vector<double> prior(V);  // by token
  for (int64_t r = 0; r < V; ++r) prior[token_of_rank[r]] = -std::log(static_cast<double>(r + 1));
  // Cumulative Zipf mass by rank, to draw tokens from the prior.
  std::vector<double> cumulative(V);
  double z0 = 0.0;
  for (int64_t r = 0; r < V; ++r) cumulative[r] = (z0 += 1.0 / static_cast<double>(r + 1));
  auto draw_from_prior = [&](Rng& rng) {
    double u = rng.uniform() * z0;
    int64_t r = std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
    return token_of_rank[std::min(r, V - 1)];
  };

  // C: channel 0 carries prior/8, the rest is N(0, 1/(D-1)); keep each noise
  // row's squared norm for the context boost.
  const double c_scale = 1.0 / std::sqrt(static_cast<double>(D - 1));
  std::vector<double> noise_norm2(V);
  parallel_rows(V, [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      Rng rng(seed, kStreamC + j);
      float* row = &out.c[j * D];
      row[0] = static_cast<float>(prior[j] / kPriorChannel);
      double norm2 = 0.0;
      for (int64_t k = 1; k < D; ++k) {
        row[k] = static_cast<float>(c_scale * rng.normal());
        norm2 += static_cast<double>(row[k]) * row[k];
      }
      noise_norm2[j] = std::max(norm2, 1e-12);
    }
  });

  parallel_rows(p.n, [&](int64_t b, int64_t e) {
    std::vector<double> hidden(D);
    // Distinct context entries: at most a quarter of a small vocabulary.
    const int64_t context_size = std::min<int64_t>(kContextTokens, V / 4);
    std::vector<int64_t> context;
    std::vector<double> extra_mass;
    std::vector<std::pair<int64_t, double>> candidates(kResampleCandidates);
    for (int64_t i = b; i < e; ++i) {
      Rng rng(seed, kStreamE + i);
      hidden[0] = kPriorChannel;
      for (int64_t k = 1; k < D; ++k) hidden[k] = kHiddenNoise * rng.normal();
      context.clear();
      extra_mass.clear();
      while (static_cast<int64_t>(context.size()) < context_size) {
        int64_t j = draw_from_prior(rng);
        if (std::find(context.begin(), context.end(), j) != context.end()) continue;
        double boost = kMaxBoost * rng.uniform();
        const float* row = &out.c[j * D];
        double scale = boost / noise_norm2[j];
        for (int64_t k = 1; k < D; ++k) hidden[k] += scale * row[k];
        context.push_back(j);
        extra_mass.push_back(0.0);
      }
      for (int64_t k = 0; k < D; ++k) out.e[i * D + k] = static_cast<float>(hidden[k]);
      // Target ~ softmax of the logits. Over the context entries exactly (their
      // logit E_i·C_j, noise included); for the rest by sampling-importance-
      // resampling: candidates drawn from the prior, weighted by exp(logit − prior),
      // whose mean also estimates the rest's share of the partition function.
      auto logit_of = [&](int64_t j) {
        const float* row = &out.c[j * D];
        double logit = 0.0;
        for (int64_t k = 0; k < D; ++k) logit += static_cast<double>(out.e[i * D + k]) * row[k];
        return logit;
      };
      double context_prior_mass = 0.0, context_mass = 0.0;
      for (size_t m = 0; m < context.size(); ++m) {
        context_prior_mass += std::exp(prior[context[m]]);
        extra_mass[m] = std::exp(logit_of(context[m]));
        context_mass += extra_mass[m];
      }
      double weight_sum = 0.0;
      for (auto& [j, w] : candidates) {
        do j = draw_from_prior(rng);
        while (std::find(context.begin(), context.end(), j) != context.end());
        w = std::exp(logit_of(j) - prior[j]);
        weight_sum += w;
      }
      const double rest_mass = (z0 - context_prior_mass) * weight_sum / static_cast<double>(candidates.size());
      auto pick = [&rng](auto& items, double total, auto mass_of) {
        double u = rng.uniform() * total;
        for (auto& item : items) {
          if (u < mass_of(item)) return &item;
          u -= mass_of(item);
        }
        return &items.back();
      };
      int64_t target;
      if (rng.uniform() * (rest_mass + context_mass) < rest_mass) {
        target = pick(candidates, weight_sum, [](auto& c) { return c.second; })->first;
      } else {
        std::vector<size_t> index(context.size());
        std::iota(index.begin(), index.end(), 0);
        target = context[*pick(index, context_mass, [&](size_t m) { return extra_mass[m]; })];
      }
      out.targets[i] = target;
    }
  });
}

}  // namespace

DataMode parse_data_mode(const std::string& text) {
  if (text == "random") return DataMode::kRandom;
  if (text == "realistic") return DataMode::kRealistic;
  throw InputError("unknown data mode '" + text + "' (expected random or realistic)");
}

const char* to_string(DataMode mode) { return mode == DataMode::kRandom ? "random" : "realistic"; }

void validate_generator_options(const Problem& problem, const GeneratorOptions& options) {
  problem.validate();
  if (!(options.ignore_fraction >= 0.0 && options.ignore_fraction <= 1.0))
    throw InputError("--ignore-frac must be in [0, 1]");
  if (options.mode == DataMode::kRealistic && problem.d < 2)
    throw InputError("--data realistic needs D >= 2 (channel 0 carries the unigram prior)");
}

HostInputs generate_inputs(const Problem& problem, const GeneratorOptions& options) {
  validate_generator_options(problem, options);
  HostInputs out;
  out.n = problem.n;
  out.d = problem.d;
  out.v = problem.v;
  out.e.resize(problem.n * problem.d);
  out.c.resize(problem.v * problem.d);
  out.targets.resize(problem.n);
  if (options.mode == DataMode::kRandom)
    generate_random(problem, options.seed, out);
  else
    generate_realistic(problem, options.seed, out);
  if (options.ignore_fraction > 0.0) {
    Rng rng(options.seed, kStreamIgnore);
    for (auto& t : out.targets)
      if (rng.uniform() < options.ignore_fraction) t = problem.ignore_index;
  }
  if (problem.dtype == Dtype::kBFloat16) {
    round_to_bf16(out.e);
    round_to_bf16(out.c);
  }
  return out;
}

uint16_t float_to_bf16_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) return 0x7FC0;  // NaN stays NaN
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

void round_to_bf16(std::vector<float>& values) {
  for (float& x : values) x = bf16_bits_to_float(float_to_bf16_bits(x));
}

void validate_inputs(const Problem& problem, const HostInputs& inputs) {
  problem.validate();
  auto expect = [](const char* what, size_t got, size_t want) {
    if (got != want)
      throw InputError(std::string(what) + " has " + std::to_string(got) + " elements, expected " +
                       std::to_string(want));
  };
  expect("E", inputs.e.size(), static_cast<size_t>(problem.n * problem.d));
  expect("C", inputs.c.size(), static_cast<size_t>(problem.v * problem.d));
  expect("targets", inputs.targets.size(), static_cast<size_t>(problem.n));
  for (size_t i = 0; i < inputs.targets.size(); ++i) {
    int64_t t = inputs.targets[i];
    if (t != problem.ignore_index && (t < 0 || t >= problem.v))
      throw InputError("target " + std::to_string(t) + " at position " + std::to_string(i) +
                       " is outside [0, V=" + std::to_string(problem.v) + ") and is not ignore_index (" +
                       std::to_string(problem.ignore_index) + ")");
  }
}

int64_t count_valid_targets(const Problem& problem, const std::vector<int64_t>& targets) {
  return std::count_if(targets.begin(), targets.end(), [&](int64_t t) { return t != problem.ignore_index; });
}

}  // namespace cce
