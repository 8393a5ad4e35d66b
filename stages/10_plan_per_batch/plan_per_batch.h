// Stage 10: stage 09's backward planned per batch, from the forward's tile
// statistics before anything is recomputed (batch_plan.cu):
//   1. the token blocks take the rows sorted by how many tiles hold an entry
//      ≥ 2^-12 (most first), so that the rows of a flat softmax, which need
//      many tiles, share blocks instead of making every block keep them;
//   2. eps (bf16) is the largest of 2^-8 … 2^-16 whose dropped softmax mass
//      per row (the targets' own entries left out: they are exact) is within
//      a budget, so that a batch of peaked rows drops much and a flat one
//      little;
//   3. stage 09's backward at that eps over those token blocks.
// README.md derives the choices and gives the measurements.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/stage.h"
#include "stages/09_deterministic_products/deterministic_products.h"

namespace cce::s10 {

using s09::add_target_terms;
using s09::DropPlan;
using s09::DropStats;
using s09::finish_de;
using s09::forward_plan;
using s09::plan_drop;
using s09::SideStream;

// The automatic eps's candidates 2^-kAutoFirstExponent … 2^-kAutoLastExponent,
// and its default budget: the mean dropped mass per row with a gradient.
constexpr int kAutoFirstExponent = 8, kAutoLastExponent = 16;
constexpr int kAutoExponents = kAutoLastExponent - kAutoFirstExponent + 1;
constexpr double kDefaultDroppedMass = 0.025;
// Token grouping counts, per row, the tiles holding an entry ≥ 2^-kGroupingExponent.
constexpr int kGroupingExponent = 12;
// The exponent chosen from dropped[k] = the mass per row dropped at eps = 2^-(kAutoFirstExponent + k):
// the first within the budget, else the last.
int choose_drop_exponent(const double (&dropped)[kAutoExponents], double budget);

// The eps a backward decided with, and what the automatic eps measured for it.
struct EpsChoice {
  float eps = 0.0f;
  double dropped_mass = -1.0;  // with the automatic eps: the mass per row it dropped (−1: a fixed eps)
  std::array<double, kAutoExponents> candidates{};  // and the mass each candidate 2^-8… would drop
};

// ---- batch_plan.cu: the plan's buffers and steps ----
struct BatchPlanBuffers {
  int* token_order = nullptr;  // [N]: token block b holds rows token_order[128b ..]
  int* token_place = nullptr;  // [N]: its inverse
  unsigned long long* dropped_mass = nullptr;  // [candidates + 1]: fixed-point masses, then the rows with a gradient
};
std::vector<MemoryItem> batch_plan_items(const Problem& problem);
BatchPlanBuffers batch_plan_buffers(const Problem& problem, const Scratch& scratch);
// The grouped token order (after s09::compute_grad_scale).
s08::TokenBlocks group_tokens(const Problem& problem, const DropPlan& plan, const BatchPlanBuffers& buffers,
                              const s09::BackwardBuffers& backward, const float* lse, cudaStream_t stream);
// The largest candidate eps whose dropped mass per row is within budget, over these token blocks.
EpsChoice choose_drop_eps(const Problem& problem, const DropPlan& plan, const BatchPlanBuffers& buffers,
                          const s09::BackwardBuffers& backward, const float* lse, const s08::TokenBlocks& blocks,
                          double budget, cudaStream_t stream);

// ---- plan_per_batch.cu: the stage ----
// The backward's settings (the stage's flags).
struct DropSettings {
  float eps = 0.0f;           // a fixed eps (0: every tile kept), unless dropped_mass > 0
  double dropped_mass = 0.0;  // > 0: eps chosen per batch within this budget
  bool correct_tail = true, correct_dc = true;
  bool group_tokens = true;   // token blocks of grouped rows (false: rows in their order)
};
// The whole backward up to the fp32 dE accumulator: the grad scale, the
// plan, stage 09's backward (s09::backward_to_accumulator says what it returns).
float* backward_to_accumulator(const DeviceInputs& in, const DropPlan& plan, const Scratch& scratch, const float* lse,
                               const float* upstream, const DropSettings& settings, void* de, void* dc,
                               cudaStream_t stream, SideStream& side, DropStats* stats, EpsChoice* choice = nullptr);
std::vector<MemoryItem> backward_scratch(const Problem& problem, const DropPlan& plan);

class PlanPerBatchStage : public s09::DeterministicProductsStage {
 public:
  std::string name() const override { return "10_plan_per_batch"; }
  std::string summary() const override {
    return "stage 09 planned per batch: eps from the dropped mass, token blocks of grouped rows";
  }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override;
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override;
  void add_options(OptionParser& parser) override;
  void validate_options() const override;
  std::vector<std::string> report_lines() const override;

  EpsChoice eps_choice() const { return choice_; }  // of the last backward
  std::vector<int> token_order() const;             // of the last backward's token blocks (for the tests)
  bool automatic_eps(Dtype dtype) const { return dtype == Dtype::kBFloat16 && !keep_all_ && eps_flag_ == 0.0; }
  // The flags as the backward's settings.
  DropSettings settings(Dtype dtype) const {
    return {drop_eps(dtype), automatic_eps(dtype) ? dropped_mass_budget() : 0.0, !no_correction_, !no_dc_correction_,
            !no_grouping_};
  }
  // A fixed eps in place of the automatic one (what --drop-eps sets).
  void fix_drop_eps(float eps) { eps_flag_ = eps, keep_all_ = eps <= 0.0f; }
  double dropped_mass_budget() const { return mass_flag_ > 0.0 ? mass_flag_ : kDefaultDroppedMass; }
  bool dropped_mass_flag_set() const { return mass_flag_ > 0.0; }

 private:
  double mass_flag_ = 0.0;  // --dropped-mass; 0 = kDefaultDroppedMass
  bool no_grouping_ = false;
  EpsChoice choice_;
};

std::unique_ptr<Stage> make_stage();

}  // namespace cce::s10
