#include "common/cublas_handle.h"

#include "common/check.h"
#include "common/device_buffer.h"

#include <mutex>

namespace cce {
namespace {
struct CublasState {
  cublasHandle_t handle = nullptr;
  cublasLtHandle_t lt = nullptr;
  DeviceBuffer<uint8_t> workspace;
  CublasState() {
    CCE_CUBLAS_CHECK(cublasCreate(&handle));
    workspace = DeviceBuffer<uint8_t>(kCublasWorkspaceBytes);
    CCE_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace.get(), workspace.bytes()));
    CCE_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
    CCE_CUBLAS_CHECK(cublasLtCreate(&lt));
  }
  ~CublasState() {
    if (lt) cublasLtDestroy(lt);
    if (handle) cublasDestroy(handle);
  }
};
// One per device, made on first use there (a process driving several GPUs,
// stage 11, has a thread per GPU, each asking on its own device).
CublasState* g_states[kMaxDevices] = {};
std::mutex g_mutex;

// The current device's state, made on first use there. Leaked on purpose:
// destroying a handle after the CUDA runtime has shut down at exit is not allowed.
const CublasState& device_state() {
  const int device = current_device_index();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_states[device]) g_states[device] = new CublasState();
  return *g_states[device];
}
}  // namespace

cublasHandle_t cublas_handle() { return device_state().handle; }

cublasHandle_t cublas_handle_on(cudaStream_t stream) {
  const CublasState& state = device_state();
  CCE_CUBLAS_CHECK(cublasSetStream(state.handle, stream));
  CCE_CUBLAS_CHECK(cublasSetWorkspace(state.handle, state.workspace.get(), state.workspace.bytes()));
  return state.handle;
}

cublasLtHandle_t cublaslt_handle() { return device_state().lt; }

bool cublas_handle_created() {
  const int device = current_device_index();
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_states[device] != nullptr;
}

}  // namespace cce
