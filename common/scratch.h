// A stage's scratch memory, allocated from the very list of named items that
// the stage's workspace() reports: the memory model is stated once, and the
// drivers' check that it equals the allocation tracker's peak keeps it honest.
//
//   std::vector<MemoryItem> items = my_scratch(problem);   // also what workspace() returns
//   scratch.allocate(items);                               // exact sizes; a changed size reallocates
//   float* dot = scratch.get<float>("target dot");
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/device_buffer.h"

namespace cce {

// One named block of device memory in a stage's memory model.
using MemoryItem = std::pair<std::string, size_t>;

class Scratch {
 public:
  // Makes every item exist with exactly its size. Items allocated earlier and
  // not named here are kept (a backward adds to what its forward allocated).
  void allocate(const std::vector<MemoryItem>& items);
  // The device buffer of an allocated item (null for a zero-byte item);
  // throws if no item of that name was allocated.
  template <typename T>
  T* get(const std::string& name) const {
    return static_cast<T*>(find(name));
  }
  bool has(const std::string& name) const;
  // The size an item was allocated with (throws like get() if it never was).
  size_t bytes(const std::string& name) const;
  void release() { buffers_.clear(); }

 private:
  const DeviceBuffer<uint8_t>& buffer(const std::string& name) const;
  void* find(const std::string& name) const;
  std::vector<std::pair<std::string, DeviceBuffer<uint8_t>>> buffers_;
};

// Concatenates memory models (forward items, then backward items, ...).
std::vector<MemoryItem> concat(std::vector<MemoryItem> a, const std::vector<MemoryItem>& b);

}  // namespace cce
