#include "common/stage.h"

#include "common/check.h"

namespace cce {

DeviceBuffer<uint8_t> upload_values(const float* values, size_t count, Dtype dtype) {
  DeviceBuffer<uint8_t> buffer(count * (dtype == Dtype::kBFloat16 ? 2 : 4));
  if (dtype == Dtype::kFloat32) {
    copy_to_device(buffer.get(), values, count * 4);
  } else {
    std::vector<uint16_t> bits(count);
    for (size_t i = 0; i < count; ++i) bits[i] = float_to_bf16_bits(values[i]);
    copy_to_device(buffer.get(), bits.data(), count * 2);
  }
  return buffer;
}

std::vector<float> download_values(const DeviceBuffer<uint8_t>& buffer, Dtype dtype) {
  std::vector<float> values(buffer.bytes() / (dtype == Dtype::kBFloat16 ? 2 : 4));
  if (values.empty()) return values;
  if (dtype == Dtype::kFloat32) {
    copy_to_host(values.data(), buffer.get(), buffer.bytes());
  } else {
    std::vector<uint16_t> bits(values.size());
    copy_to_host(bits.data(), buffer.get(), buffer.bytes());
    for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_bits_to_float(bits[i]);
  }
  return values;
}

DeviceInputs DeviceInputs::borrow(const Problem& problem, const void* e, const void* c, const int64_t* targets) {
  DeviceInputs d;
  d.problem = problem;
  const size_t element = problem.element_bytes();
  // The stages read these buffers only: const is restored at every use.
  d.e = DeviceBuffer<uint8_t>::borrow(static_cast<uint8_t*>(const_cast<void*>(e)), problem.n * problem.d * element);
  d.c = DeviceBuffer<uint8_t>::borrow(static_cast<uint8_t*>(const_cast<void*>(c)), problem.v * problem.d * element);
  d.targets = DeviceBuffer<int64_t>::borrow(const_cast<int64_t*>(targets), problem.n);
  return d;
}

DeviceInputs DeviceInputs::upload(const Problem& problem, const HostInputs& inputs) {
  validate_inputs(problem, inputs);
  DeviceInputs d;
  d.problem = problem;
  d.e = upload_values(inputs.e.data(), inputs.e.size(), problem.dtype);
  d.c = upload_values(inputs.c.data(), inputs.c.size(), problem.dtype);
  d.targets = DeviceBuffer<int64_t>(inputs.targets.size());
  copy_to_device(d.targets.get(), inputs.targets.data(), inputs.targets.size() * 8);
  return d;
}

void Stage::loss_and_gradient(const DeviceInputs& in, float* loss, float* lse, const float* upstream, void* de,
                              void* dc, cudaStream_t stream) {
  expect_backward(true);
  forward(in, loss, lse, stream);
  backward(in, lse, upstream, de, dc, stream);
}

void ForwardOnlyStage::backward(const DeviceInputs&, const float*, const float*, void*, void*, cudaStream_t) {
  throw InputError("stage " + name() + " computes the forward only (the fused backward comes in stage 06)");
}

namespace {

class PartsStage : public Stage {
 public:
  explicit PartsStage(const StageParts& parts) : parts_(parts) {}
  std::string name() const override { return parts_.name; }
  std::string summary() const override { return parts_.summary; }
  bool has_backward() const override { return static_cast<bool>(parts_.backward); }
  std::vector<MemoryItem> workspace(const Problem& problem, bool backward) const override {
    return parts_.workspace(problem, backward);
  }
  void forward(const DeviceInputs& in, float* loss, float* lse, cudaStream_t stream) override {
    last_ = in.problem;
    parts_.forward(in, scratch_, loss, lse, stream);
  }
  void backward(const DeviceInputs& in, const float* lse, const float* upstream, void* de, void* dc,
                cudaStream_t stream) override {
    if (!parts_.backward)
      throw InputError("stage " + name() + " computes the forward only (the fused backward comes in stage 06)");
    parts_.backward(in, scratch_, lse, upstream, de, dc, stream);
  }
  std::vector<std::string> report_lines() const override {
    return parts_.report && last_.n > 0 ? parts_.report(last_) : std::vector<std::string>{};
  }

 private:
  StageParts parts_;
  Problem last_;
};

}  // namespace

std::unique_ptr<Stage> make_stage_from(const StageParts& parts) { return std::make_unique<PartsStage>(parts); }

std::vector<MemoryItem> output_memory(const Problem& p, bool backward) {
  size_t per_token = p.reduction == Reduction::kNone ? static_cast<size_t>(p.n) : 1;
  std::vector<MemoryItem> items = {{"loss", per_token * 4}, {"LSE", static_cast<size_t>(p.n) * 4}};
  if (backward) {
    items.push_back({"upstream gradient", per_token * 4});
    items.push_back({"dE", static_cast<size_t>(p.n * p.d) * p.element_bytes()});
    items.push_back({"dC", static_cast<size_t>(p.v * p.d) * p.element_bytes()});
  }
  return items;
}

size_t total_bytes(const std::vector<MemoryItem>& items) {
  size_t total = 0;
  for (const auto& item : items) total += item.second;
  return total;
}

size_t input_bytes(const Problem& p) {
  return static_cast<size_t>(p.n * p.d + p.v * p.d) * p.element_bytes() + static_cast<size_t>(p.n) * 8;
}

}  // namespace cce
