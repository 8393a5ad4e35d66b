#include "common/runner.h"

#include <algorithm>
#include <random>

#include "common/check.h"
#include "common/cublas_handle.h"
#include "common/timer.h"

namespace cce {

StageRunner::StageRunner(Stage& stage, const Problem& problem, const HostInputs& inputs, std::vector<float> upstream)
    : stage_(stage), problem_(problem), upstream_(std::move(upstream)) {
  cublas_handle();  // its workspace is a fixed, process-wide cost: keep it out of the stage's numbers
  baseline_bytes_ = AllocationTracker::current_bytes();
  AllocationTracker::reset_peak();
  inputs_ = DeviceInputs::upload(problem, inputs);
  size_t per_token = problem.reduction == Reduction::kNone ? problem.n : 1;
  if (upstream_.size() != per_token)
    throw InputError("upstream gradient must have " + std::to_string(per_token) + " values");
  loss_ = DeviceBuffer<float>(per_token);
  lse_ = DeviceBuffer<float>(problem.n);
}

void StageRunner::allocate_gradients() {
  if (de_.get()) return;
  const size_t per_token = upstream_.size();
  upstream_dev_ = DeviceBuffer<float>(per_token);
  copy_to_device(upstream_dev_.get(), upstream_.data(), per_token * 4);
  de_ = DeviceBuffer<uint8_t>(problem_.n * problem_.d * problem_.element_bytes());
  dc_ = DeviceBuffer<uint8_t>(problem_.v * problem_.d * problem_.element_bytes());
  poison_device(de_.get(), de_.bytes());
  poison_device(dc_.get(), dc_.bytes());
}

void StageRunner::poison_outputs() {
  poison_device(loss_.get(), loss_.bytes());
  poison_device(lse_.get(), lse_.bytes());
  if (de_.get()) poison_device(de_.get(), de_.bytes());
  if (dc_.get()) poison_device(dc_.get(), dc_.bytes());
  synchronize();
}

void StageRunner::forward() {
  stage_.expect_backward(false);
  stage_.forward(inputs_, loss_.get(), lse_.get(), nullptr);
}

void StageRunner::forward_backward() {
  if (!stage_.has_backward()) throw InputError("stage " + stage_.name() + " has no backward (it comes in a later stage)");
  allocate_gradients();
  stage_.loss_and_gradient(inputs_, loss_.get(), lse_.get(), upstream_dev_.get(), de_.get(), dc_.get(), nullptr);
}

void StageRunner::forward_then_backward() {
  if (!stage_.has_backward()) throw InputError("stage " + stage_.name() + " has no backward (it comes in a later stage)");
  allocate_gradients();
  stage_.expect_backward(true);
  stage_.forward(inputs_, loss_.get(), lse_.get(), nullptr);
  stage_.backward(inputs_, lse_.get(), upstream_dev_.get(), de_.get(), dc_.get(), nullptr);
}

void StageRunner::synchronize() { CCE_CUDA_CHECK(cudaDeviceSynchronize()); }

HostOutputs StageRunner::download() const {
  CCE_CUDA_CHECK(cudaDeviceSynchronize());
  HostOutputs out;
  out.loss.resize(loss_.size());
  out.lse.resize(lse_.size());
  copy_to_host(out.loss.data(), loss_.get(), loss_.bytes());
  copy_to_host(out.lse.data(), lse_.get(), lse_.bytes());
  out.de = download_values(de_, problem_.dtype);  // empty before the first backward
  out.dc = download_values(dc_, problem_.dtype);
  return out;
}

double StageRunner::time_forward_ms(int iters, int warmup) {
  return time_median_ms([&] { forward(); }, iters, warmup);
}

double StageRunner::time_forward_backward_ms(int iters, int warmup) {
  return time_median_ms([&] { forward_backward(); }, iters, warmup);
}

size_t StageRunner::peak_beyond_inputs() const {
  return AllocationTracker::peak_bytes() - baseline_bytes_ - inputs_.bytes();
}

void StageRunner::reset_peak_memory() {
  stage_.release_workspace();
  AllocationTracker::reset_peak();
}

std::vector<MemoryItem> StageRunner::memory_model(bool backward) const {
  std::vector<MemoryItem> items = output_memory(problem_, backward);
  for (auto& item : stage_.workspace(problem_, backward)) items.push_back(item);
  return items;
}

bool CheckReport::passed() const {
  if (comparisons.empty()) return false;
  for (const auto& c : comparisons)
    if (!c.passed()) return false;
  return true;
}

CheckReport check_outputs(const Problem& p, const HostInputs& in, const HostOutputs& out,
                          const std::vector<float>& upstream, bool backward, int64_t full_limit, int sampled_rows,
                          GradientApproximation approximation) {
  CheckReport report;
  ReferenceOptions opt;
  opt.backward = backward;
  opt.upstream = upstream;
  opt.bounds = true;
  opt.approximation = approximation;
  const bool sampled = p.n * p.v > full_limit && p.n > sampled_rows;
  if (sampled) {
    std::mt19937_64 rng(p.n * 31 + p.v);
    opt.rows = {0, p.n - 1};
    while (static_cast<int>(opt.rows.size()) < sampled_rows) {
      int64_t r = static_cast<int64_t>(rng() % p.n);
      if (std::find(opt.rows.begin(), opt.rows.end(), r) == opt.rows.end()) opt.rows.push_back(r);
    }
    std::sort(opt.rows.begin(), opt.rows.end());
    report.note = "sampled check: " + std::to_string(sampled_rows) + " of " + std::to_string(p.n) +
                  " rows (LSE" + (p.reduction == Reduction::kNone ? ", loss" : "") + (backward ? ", dE rows" : "") +
                  "); the reduced loss" + (backward ? " and dC" : "") + " need every row and are not compared";
  } else {
    report.note = "full check: every output element";
  }
  ReferenceResult ref = reference_cross_entropy(p, in, opt);

  // The rows of `all` that the reference computed; an output of the wrong
  // size is passed through whole, so that the comparison reports the size.
  auto pick = [&](const std::vector<float>& all, int64_t width) {
    if (all.size() != static_cast<size_t>(p.n * width)) return all;
    std::vector<float> rows;
    for (int64_t r : ref.rows) rows.insert(rows.end(), all.begin() + r * width, all.begin() + (r + 1) * width);
    return rows;
  };
  report.comparisons.push_back(compare("lse", pick(out.lse, 1), ref.lse, ref.lse_bound, 0.0));
  if (p.reduction == Reduction::kNone)
    report.comparisons.push_back(compare("loss", pick(out.loss, 1), ref.loss_per_token, ref.loss_per_token_bound, 0.0));
  else if (ref.all_rows)
    report.comparisons.push_back(compare("loss", out.loss, {ref.loss}, Tolerance{ref.loss_bound, 0.0}));
  if (backward) {
    report.comparisons.push_back(compare("dE", pick(out.de, p.d), ref.de, ref.de_bound, ref.output_rtol, p.d));
    if (ref.all_rows) report.comparisons.push_back(compare("dC", out.dc, ref.dc, ref.dc_bound, ref.output_rtol, p.d));
  }
  return report;
}

}  // namespace cce
