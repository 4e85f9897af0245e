// stragglar-bench-gpu: the GPU mode of stragglar-bench — the same runner (tools/bench/bench_runner.hpp:
// flags, sizes, inputs, checks, timing definitions, calibration, output), with this NCCL
// backend: device buffers, the NCCL front-end on one non-blocking stream, the delayed rank's
// sleep as a GPU kernel on its stream (the host never waits), CUDA events as the clock, and
// ncclSend/ncclRecv exchanges and the reduce kernel for the calibration. One MPI process per
// GPU rank (several may share a GPU: docs/gpu.md "Tests"); MPI bootstraps the ncclUniqueId and
// gives the common start.
//
//   mpirun -np 8 ./build/stragglar-bench-gpu -b 64M -e 64M -d float
//          --algo stragglar,ring,native,auto --straggler 7 --delay 300 --json out.json
//
// docs/gpu.md "Benchmarks", docs/runtime.md "stragglar-bench".
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../../tests/gpu/cuda_presence.hpp"
#include "../../tests/gpu/mpi_gpu_place.hpp"
#include "cuda_check.hpp"
#include "bench_runner.hpp"
#include "kernels.hpp"
#include "nccl_front.hpp"
#include "stragglar/nccl.hpp"

using namespace stragglar;

namespace {

class NcclBackend final : public bench::Backend {
 public:
  NcclBackend(ncclComm_t comm, std::string transport) : comm_(comm), transport_(std::move(transport)) {
    STRAGGLAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&start_, &entry_, &exit_}) STRAGGLAR_CUDA_CHECK(cudaEventCreate(e));
    int dev = 0;
    STRAGGLAR_CUDA_CHECK(cudaGetDevice(&dev));
    STRAGGLAR_CUDA_CHECK(cudaDeviceGetAttribute(&max_blocks_, cudaDevAttrMultiProcessorCount, dev));
    max_blocks_ *= 4;
  }
  ~NcclBackend() override {
    (void)cudaStreamSynchronize(stream_);
    if (work_ != nullptr) (void)cudaFree(work_);
    if (input_ != nullptr) (void)cudaFree(input_);
    for (cudaEvent_t e : {start_, entry_, exit_}) (void)cudaEventDestroy(e);
    (void)cudaStreamDestroy(stream_);
  }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  std::string transport() const override { return transport_; }
  void allocate(std::size_t bytes) override {
    STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (work_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(work_));
    if (input_ != nullptr) STRAGGLAR_CUDA_CHECK(cudaFree(input_));
    work_ = input_ = nullptr;
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&work_, bytes));
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&input_, bytes));
  }
  // Host buffers are pageable and may change after the call: copy on the stream, then wait.
  void upload_input(const void* host, std::size_t bytes) override { upload(input_, host, bytes); }
  void upload_work(const void* host, std::size_t bytes) override { upload(work_, host, bytes); }
  void download_work(void* host, std::size_t bytes) override {
    if (bytes > 0) STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(host, work_, bytes, cudaMemcpyDeviceToHost, stream_));
    STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void reset(std::size_t bytes) override {
    if (bytes > 0) STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(work_, input_, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  void allreduce(std::size_t count, DataType t, ReduceOp op, const Options& o, PhaseSelection phases) override {
    detail::nccl_allreduce(work_, work_, count, t, op, comm_, stream_, o, phases);
  }
  void drain() override { STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  void mark_start() override { STRAGGLAR_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  void sleep(double ms) override { cuda::launch_sleep(stream_, static_cast<long long>(ms * 1e6)); }
  void mark_entry() override { STRAGGLAR_CUDA_CHECK(cudaEventRecord(entry_, stream_)); }
  void mark_exit() override { STRAGGLAR_CUDA_CHECK(cudaEventRecord(exit_, stream_)); }
  Times read_times() override {
    STRAGGLAR_CUDA_CHECK(cudaEventSynchronize(exit_));
    float exit_ms = 0, entry_ms = 0;
    STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&exit_ms, start_, exit_));
    STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&entry_ms, start_, entry_));
    return {exit_ms * 1e-3, entry_ms * 1e-3};
  }
  detail::Choice last_choice() override { return detail::nccl_last_choice(comm_); }
  double time_exchange(std::size_t bytes, int peer) override {
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(start_, stream_));
    if (peer >= 0) {
      STRAGGLAR_NCCL_CHECK(ncclGroupStart());
      STRAGGLAR_NCCL_CHECK(ncclSend(input_, bytes, ncclChar, peer, comm_, stream_));
      STRAGGLAR_NCCL_CHECK(ncclRecv(work_, bytes, ncclChar, peer, comm_, stream_));
      STRAGGLAR_NCCL_CHECK(ncclGroupEnd());
    }
    return elapsed_since_start();
  }
  double time_reduce(std::size_t count, DataType t, ReduceOp op) override {
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(start_, stream_));
    cuda::launch_reduce(work_, input_, count, t, op, stream_, max_blocks_);
    return elapsed_since_start();
  }

 private:
  void upload(void* dst, const void* host, std::size_t bytes) {
    if (bytes > 0) STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream_));
    STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  double elapsed_since_start() {
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(exit_, stream_));
    STRAGGLAR_CUDA_CHECK(cudaEventSynchronize(exit_));
    float ms = 0;
    STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, exit_));
    return ms * 1e-3;
  }

  ncclComm_t comm_;
  std::string transport_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, entry_ = nullptr, exit_ = nullptr;
  void* work_ = nullptr;
  void* input_ = nullptr;
  int max_blocks_ = 0;
};

const bench::Tool kTool{"stragglar-bench-gpu",
                        "stragglar-bench-gpu: AllReduce timings under a straggler on GPUs (NCCL), shaped like nccl-tests",
                        "GPU sleep kernel on the delayed rank's stream",
                        "Measure alpha, beta (pairwise ncclSend/ncclRecv exchanges) and gamma (the reduce kernel); "
                        "print the model's prediction"};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  bench::RunnerFlags flags;
  if (const auto code = bench::parse_flags(argc, argv, kTool, flags)) {
    MPI_Finalize();
    return *code;
  }

  // Skip only without a GPU (tests/gpu/cuda_presence.hpp); any other CUDA error fails.
  const gpu_test::CudaPresence gpu = gpu_test::cuda_presence();
  const gpu_test::GpuPlace place = gpu_test::place_on_gpu(gpu, rank, "stragglar-bench-host");
  if (place.worst != 0) {
    if (gpu.kind == gpu_test::CudaPresence::error) std::fprintf(stderr, "[rank %d] %s: %s\n", rank, kTool.name, gpu.detail.c_str());
    if (place.worst == 1 && rank == 0) std::printf("no CUDA device: skipped (%s)\n", gpu.detail.c_str());
    MPI_Finalize();
    return place.worst == 1 ? 77 : 2;  // 77: skipped (CTest's SKIP_RETURN_CODE), never a pass
  }
  const std::string transport = place.shared ? "NCCL over loopback sockets, " + std::to_string(gpu.devices) + " GPU shared"
                                       : "NCCL (default transports)";
  int rc = 0;
  try {
    STRAGGLAR_CUDA_CHECK(cudaSetDevice(place.device));
    ncclUniqueId id;
    if (rank == 0) STRAGGLAR_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    STRAGGLAR_NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank));
    {
      NcclBackend backend(comm, transport);
      try {
        rc = bench::run(kTool, flags, backend);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::InvalidUsage) throw;
        if (rank == 0) std::fprintf(stderr, "%s: %s\n", kTool.name, e.what());  // a flag value, on every rank
        rc = 2;
      }
      // Released while the backend's stream still exists (the session's last call ran on it;
      // the engine frees on a stream of its own either way).
      nccl_comm_release(comm);
    }
    STRAGGLAR_NCCL_CHECK(ncclCommDestroy(comm));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s: %s\n", rank, kTool.name, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
