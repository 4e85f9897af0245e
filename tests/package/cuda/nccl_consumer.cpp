// C++ side of the NCCL consumer (stragglar/nccl.hpp, C++20). Without --gpu it runs only what
// needs no device; with --gpu (one GPU) it runs a one-rank StragglAR allreduce through both APIs.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stragglar/nccl.hpp>
#include <stragglar/stragglar_nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

stragglar_result fill_and_reduce(float* data, size_t count, float value, ncclComm_t comm, cudaStream_t stream);

namespace {

int run_on_gpu() {
  ncclComm_t comm = nullptr;
  int device = 0;
  if (ncclCommInitAll(&comm, 1, &device) != ncclSuccess) return std::fprintf(stderr, "ncclCommInitAll failed\n"), 1;
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);
  const std::size_t count = 1000;
  float* data = nullptr;
  cudaMalloc(reinterpret_cast<void**>(&data), count * sizeof(float));
  int failures = fill_and_reduce(data, count, 3.0f, comm, stream) == stragglar_success ? 0 : 1;
  stragglar::nccl_allreduce(data, data, count, stragglar::DataType::float32, stragglar::ReduceOp::sum, comm, stream);
  std::vector<float> host(count);
  cudaMemcpyAsync(host.data(), data, count * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  for (float v : host) failures += v == 3.0f ? 0 : 1;
  stragglar::nccl_comm_release(comm);
  cudaFree(data);
  cudaStreamDestroy(stream);
  ncclCommDestroy(comm);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  using stragglar::DataType;
  for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16, DataType::int32,
                     DataType::int64}) {
    if (stragglar::from_nccl(stragglar::to_nccl(t)) != t) {
      std::fprintf(stderr, "FAIL: NCCL type mapping of %s\n", stragglar::to_string(t));
      return EXIT_FAILURE;
    }
  }
  if (argc > 1 && std::strcmp(argv[1], "--gpu") == 0) return run_on_gpu() == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
  std::printf("nccl consumer: linked; NCCL type mapping ok (no --gpu: nothing run on a device)\n");
  return EXIT_SUCCESS;
}
