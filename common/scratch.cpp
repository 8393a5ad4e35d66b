#include "common/scratch.h"

#include "common/check.h"

namespace cce {

void Scratch::allocate(const std::vector<MemoryItem>& items) {
  for (const auto& [name, bytes] : items) {
    bool found = false;
    for (auto& [have, buffer] : buffers_) {
      if (have != name) continue;
      found = true;
      if (buffer.bytes() != bytes) buffer = DeviceBuffer<uint8_t>(bytes);
    }
    if (!found) buffers_.emplace_back(name, DeviceBuffer<uint8_t>(bytes));
  }
}

bool Scratch::has(const std::string& name) const {
  for (const auto& item : buffers_)
    if (item.first == name) return true;
  return false;
}

const DeviceBuffer<uint8_t>& Scratch::buffer(const std::string& name) const {
  for (const auto& [have, buffer] : buffers_)
    if (have == name) return buffer;
  throw CudaError("scratch item '" + name + "' was never allocated (a stage bug: see its workspace())");
}

void* Scratch::find(const std::string& name) const { return buffer(name).get(); }

size_t Scratch::bytes(const std::string& name) const { return buffer(name).bytes(); }

std::vector<MemoryItem> concat(std::vector<MemoryItem> a, const std::vector<MemoryItem>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace cce
