// Is there a GPU to test on? One rule for the GPU tests and stragglar-bench-gpu: skip only when
// the machine has no GPU — cudaGetDeviceCount says cudaErrorNoDevice,
// or no CUDA driver is installed at all (libcuda.so.1 cannot be loaded: CI and build hosts then
// get cudaErrorInsufficientDriver or cudaErrorStubLibrary). Any other error, e.g. a driver
// older than the runtime on a GPU machine, is a failure to report, never a skip.
#pragma once
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>

namespace stragglar::gpu_test {

struct CudaPresence {
  enum Kind { present, absent, error } kind = absent;
  int devices = 0;
  std::string detail;  // why absent, or the error
};

inline CudaPresence cuda_presence() {
  CudaPresence p;
  const cudaError_t e = cudaGetDeviceCount(&p.devices);
  if (e == cudaSuccess && p.devices > 0) {
    p.kind = CudaPresence::present;
    return p;
  }
  const std::string what = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  if (e == cudaSuccess || e == cudaErrorNoDevice) {
    p.kind = CudaPresence::absent;
    p.detail = e == cudaSuccess ? "0 devices" : what;
    return p;
  }
  if (e == cudaErrorInsufficientDriver || e == cudaErrorStubLibrary) {
    if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver == nullptr) {
      p.kind = CudaPresence::absent;
      p.detail = "no CUDA driver installed (libcuda.so.1 not found); " + what;
      return p;
    } else {
      dlclose(driver);
    }
  }
  p.kind = CudaPresence::error;
  p.detail = what;
  p.devices = 0;
  return p;
}

}  // namespace stragglar::gpu_test
