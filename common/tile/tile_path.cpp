#include "common/tile/tile_path.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "common/check.h"
#include "common/device_buffer.h"
#include "common/tile/wgmma_pipeline_shape.h"

namespace cce {
namespace {

void note_once(const std::string& text) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(text).second) std::fprintf(stderr, "note: %s\n", text.c_str());
}

struct DeviceFacts {
  bool present = false;
  int major = 0, minor = 0, sms = 132;
  size_t shared_optin = 0;
};

// The current device's facts, asked once per device (a process may drive GPUs
// of several kinds); without a device, an H100's multiprocessors.
const DeviceFacts& device_facts() {
  static const DeviceFacts none;
  static const bool present = cuda_device_available();
  if (!present) return none;
  static std::mutex mutex;
  static DeviceFacts facts[kMaxDevices];
  const int device = current_device_index();
  std::lock_guard<std::mutex> lock(mutex);
  DeviceFacts& f = facts[device];
  if (!f.present) {
    int shared = 0;
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device));
    CCE_CUDA_CHECK(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    f.shared_optin = static_cast<size_t>(shared);
    f.present = true;
  }
  return f;
}

// Whether the Hopper paths can run: an sm_90a build on a 9.0 device (without
// a device the plans assume an H100, so that memory tables are right there).
bool hopper_ready(bool need_pipeline_shared) {
  const DeviceFacts& f = device_facts();
#ifdef CCE_HAVE_WGMMA
  if (!f.present) return true;
  if (f.major != 9 || f.minor != 0) return false;
  if (need_pipeline_shared && f.shared_optin < kWgmmaPipelineMinSharedBytes) {
    note_once("this GPU offers " + std::to_string(f.shared_optin / 1024) +
              " KB of shared memory per block, the wgmma pipeline needs " +
              std::to_string(kWgmmaPipelineMinSharedBytes / 1024) + " KB: using block-level wgmma tiles");
    return false;
  }
  return true;
#else
  (void)need_pipeline_shared;
  if (f.present && f.major == 9 && f.minor == 0)
    note_once("built without sm_90a (CMAKE_CUDA_ARCHITECTURES has no 90): this Hopper GPU runs mma.sync tiles");
  return false;
#endif
}

TilePath fastest(const Problem& p, bool block_only) {
  if (p.dtype == Dtype::kFloat32) return TilePath::kFp32;
  if (p.d % 8 != 0) return TilePath::kMmaSyncUnaligned;
  if (!block_only && hopper_ready(true)) return TilePath::kWgmmaPipeline;
  if (hopper_ready(false)) return TilePath::kWgmma;
  return TilePath::kMmaSyncForward;
}

// CCE_TILE_PATH: a slower path on request, if it can run this problem.
TilePath requested(const Problem& p, TilePath best) {
  const char* env = std::getenv("CCE_TILE_PATH");
  if (env == nullptr || *env == '\0') return best;
  const std::string want = env;
  TilePath path;
  if (want == "fp32") path = TilePath::kFp32;
  else if (want == "mma_sync") path = p.d % 8 == 0 ? TilePath::kMmaSyncForward : TilePath::kMmaSyncUnaligned;
  else if (want == "wgmma") path = TilePath::kWgmma;
  else if (want == "pipeline") path = TilePath::kWgmmaPipeline;
  else {
    note_once("CCE_TILE_PATH=" + want + " is not one of fp32, mma_sync, wgmma, pipeline: ignored");
    return best;
  }
  const bool fp32 = p.dtype == Dtype::kFloat32;
  const bool fits = fp32 ? path == TilePath::kFp32
                         : path != TilePath::kFp32 && static_cast<int>(path) <= static_cast<int>(best);
  if (!fits) {
    note_once(std::string("CCE_TILE_PATH=") + want + " cannot run this problem here: using " + to_string(best));
    return best;
  }
  return path;
}

}  // namespace

const char* to_string(TilePath path) {
  switch (path) {
    case TilePath::kFp32: return "fp32 FFMA tiles";
    case TilePath::kMmaSync: return "bf16 mma.sync tiles";
    case TilePath::kMmaSyncUnaligned: return "bf16 mma.sync tiles, element loads (D % 8 != 0)";
    case TilePath::kMmaSyncForward: return "bf16 mma.sync tiles, 4 warps of 64x64, 2 blocks per SM";
    case TilePath::kWgmma: return "bf16 wgmma tiles, block-level (sm_90a)";
    case TilePath::kWgmmaPipeline: return "bf16 wgmma pipeline: TMA, warp-specialized, persistent (sm_90a)";
  }
  return "?";
}

TileShape tile_shape(TilePath path) {
  switch (path) {
    case TilePath::kFp32: return {64, 64};
    case TilePath::kWgmmaPipeline: return {128, 256};
    default: return {128, 128};
  }
}

TilePath choose_forward_path(const Problem& p) { return requested(p, fastest(p, false)); }

TilePath choose_block_path(const Problem& p) {
  const TilePath path = choose_forward_path(p);
  // The block-level wgmma tiles address rows in 32-bit counts of 16-byte chunks (tile_wgmma.cuh).
  const bool offsets_fit = std::max(p.n, p.v) * (p.d / 8) < (int64_t{1} << 32);
  if ((path == TilePath::kWgmmaPipeline || path == TilePath::kWgmma) && !offsets_fit) return TilePath::kMmaSync;
  if (path == TilePath::kWgmmaPipeline) return TilePath::kWgmma;
  if (path == TilePath::kMmaSyncForward) return TilePath::kMmaSync;
  return path;
}

int multiprocessor_count() { return device_facts().sms; }

TileUnits plan_tile_units(const Problem& p, TilePath path, const UnitPolicy& policy) {
  const TileShape shape = tile_shape(path);
  TileUnits u;
  u.token_blocks = (p.n + shape.bm - 1) / shape.bm;
  u.vocab_tiles = (p.v + shape.bn - 1) / shape.bn;
  const int64_t sms = multiprocessor_count();
  const bool pipeline = path == TilePath::kWgmmaPipeline;
  int64_t ranges = policy.ranges;
  if (ranges <= 0 && pipeline) {
    // Every persistent block should get the same number of tiles: try every
    // range length and keep the one whose busiest block has the fewest tiles.
    int64_t best_cost = INT64_MAX;
    for (int64_t per_range = u.vocab_tiles; per_range >= 1; --per_range) {
      const int64_t r = (u.vocab_tiles + per_range - 1) / per_range;
      if (r > policy.max_ranges) break;
      const int64_t units = u.token_blocks * r;
      const int64_t cost = ((units + sms - 1) / sms) * per_range;
      if (cost < best_cost) best_cost = cost, ranges = r;
    }
  } else if (ranges <= 0 && policy.fill_wave) {
    const int64_t resident = sms * std::max(policy.blocks_per_sm, 1);
    ranges = resident / u.token_blocks;
  } else if (ranges <= 0) {
    ranges = u.vocab_tiles;
  }
  ranges = std::clamp<int64_t>(ranges, 1, std::max<int64_t>(u.vocab_tiles, 1));
  u.tiles_per_range = (u.vocab_tiles + ranges - 1) / ranges;
  u.ranges = (u.vocab_tiles + u.tiles_per_range - 1) / u.tiles_per_range;  // no empty range
  int64_t group = policy.token_group;
  if (group <= 0 && pipeline) {
    const int64_t block_bytes = shape.bm * p.d * static_cast<int64_t>(p.element_bytes());
    group = std::max<int64_t>(1, (int64_t{20} << 20) / std::max<int64_t>(block_bytes, 1));
    const int64_t groups = (u.token_blocks + group - 1) / group;
    group = (u.token_blocks + groups - 1) / groups;  // groups of equal size
  } else if (group <= 0) {
    group = u.ranges == u.vocab_tiles ? 8 : u.token_blocks;
  }
  u.token_group = std::clamp<int64_t>(group, 1, std::max<int64_t>(u.token_blocks, 1));
  u.grid = pipeline ? std::min(u.count(), sms) : u.count();
  return u;
}

}  // namespace cce
