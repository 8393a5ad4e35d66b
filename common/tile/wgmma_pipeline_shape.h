// The shape of the wgmma pipeline (wgmma_pipeline.cuh), in a header the host
// code includes too (tile_path.cpp decides whether the pipeline fits the GPU).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cce {

struct WgmmaPipeline {
  static constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
  static constexpr int kConsumers = 2, kThreads = 128 * (1 + kConsumers);
  static constexpr int kABytes = kBM * kBK * 2, kBBytes = kBN * kBK * 2, kStageBytes = kABytes + kBBytes;
  static constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
  static constexpr size_t kPipelineBytes = static_cast<size_t>(kStageBytes) * kStages;
  static constexpr size_t kBarrierBytes = 2 * kStages * sizeof(uint64_t);
  // +1024: the swizzled stages must start on a 1024-byte boundary.
  static constexpr size_t shared_bytes(size_t epilogue_bytes) {
    return 1024 + kPipelineBytes + kBarrierBytes + epilogue_bytes;
  }
};

// The most shared memory an epilogue may ask for on the pipeline (checked at
// compile time in launch.cuh), and so what a GPU must offer per block.
constexpr size_t kWgmmaPipelineMaxEpilogueBytes = 16 * 1024;
constexpr size_t kWgmmaPipelineMinSharedBytes = WgmmaPipeline::shared_bytes(kWgmmaPipelineMaxEpilogueBytes);

}  // namespace cce
