// bench_nccl_rounds: what one round of stragglar's executor costs over NCCL — the host's time to
// enqueue it (the executor never waits on the host between rounds: one NCCL group of
// ncclSend/ncclRecv, then the reduce kernel, and on), and the GPU time per round from CUDA
// events — per algorithm, rank count n and buffer size. The simulator prices rounds with the
// host figure (stragglar simulate --round-costs FILE; docs/gpu.md "The simulator's GPU model").
//
//   mpirun -np 8 ./bench_nccl_rounds [--nranks 2-8] [-b 1K -e 256M -f 4 | --sizes LIST]
//          [--algo stragglar,ring] [-n 5] [--deadline S] [--json FILE]
//
// One MPI process per rank (several may share a GPU: each its own NCCL_HOSTID, sockets over
// loopback, docs/gpu.md "Tests"); the run itself is bench/rounds/round_bench_runner.hpp's, this
// file its NCCL backend: the Executor over NcclTransport + CudaDevice on one stream, native =
// ncclAllReduce. Without a GPU it says so and exits 77; any other CUDA error fails.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../../tests/gpu/cuda_presence.hpp"
#include "../../tests/gpu/mpi_gpu_place.hpp"
#include "cuda_check.hpp"
#include "cuda_device.hpp"
#include "nccl_transport.hpp"
#include "round_bench_options.hpp"
#include "round_bench_runner.hpp"
#include "runtime/executor.hpp"

using namespace stragglar;

namespace {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { (void)cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // At least `bytes`, contents undefined; the stream must be idle (the caller synchronised it).
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    STRAGGLAR_CUDA_CHECK(cudaFree(p_));
    p_ = nullptr;
    size_ = 0;
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&p_, bytes));
    size_ = bytes;
  }
  void release() noexcept {
    (void)cudaFree(p_);
    p_ = nullptr;
    size_ = 0;
  }
  void* get() const { return p_; }
  std::size_t size() const { return size_; }

 private:
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

class NcclBackend final : public bench::RoundBackend {
 public:
  NcclBackend(int rank, int device, std::string transport, double call_timeout_s)
      : rank_(rank), device_(device), transport_(std::move(transport)), timeout_s_(call_timeout_s) {
    STRAGGLAR_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&start_));
    STRAGGLAR_CUDA_CHECK(cudaEventCreate(&end_));
    comms_.assign(1, nullptr);
  }
  ~NcclBackend() override { close(); }
  NcclBackend(const NcclBackend&) = delete;
  NcclBackend& operator=(const NcclBackend&) = delete;

  void add_group(int n, MPI_Comm comm) override {
    if (static_cast<int>(comms_.size()) <= n) comms_.resize(static_cast<std::size_t>(n) + 1, nullptr);
    if (comm == MPI_COMM_NULL) return;
    ncclUniqueId id;
    if (rank_ == 0) STRAGGLAR_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    STRAGGLAR_NCCL_CHECK(ncclCommInitRank(&comms_[static_cast<std::size_t>(n)], n, id, rank_));
  }
  void prepare(std::size_t bytes, float value) override {
    sync();
    input_.reserve(bytes);
    work_.reserve(bytes);
    const std::vector<float> host(bytes / sizeof(float), value);
    STRAGGLAR_CUDA_CHECK(cudaMemcpy(input_.get(), host.data(), bytes, cudaMemcpyHostToDevice));
  }
  void begin_point(int n, const Plan* plan, std::size_t count) override {
    comm_ = comms_.at(static_cast<std::size_t>(n));
    plan_ = plan;
    count_ = count;
    if (plan != nullptr) {
      sync();
      scratch_.reserve(std::max<std::size_t>(Executor::scratch_bytes(*plan, count, DataType::float32), 16));
    }
    transport_obj_ = std::make_unique<NcclTransport>(comm_, stream_, timeout_s_);
    cuda_device_ = std::make_unique<CudaDevice>(stream_, device_);
    executor_ = std::make_unique<Executor>(*transport_obj_, *cuda_device_);
  }
  void reset() override {
    STRAGGLAR_CUDA_CHECK(
        cudaMemcpyAsync(work_.get(), input_.get(), count_ * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
    sync();
  }
  void mark_start() override { STRAGGLAR_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  void call() override {
    if (plan_ == nullptr)
      cuda::settle_nccl(comm_, ncclAllReduce(work_.get(), work_.get(), count_, ncclFloat, ncclSum, comm_, stream_),
                        "ncclAllReduce", timeout_s_);
    else
      executor_->run(*plan_, work_.get(), count_, DataType::float32, ReduceOp::sum, scratch_.get(), scratch_.size());
  }
  // Polled with the communicator's asynchronous errors and a deadline: a lost peer fails, never hangs.
  double finish() override {
    STRAGGLAR_CUDA_CHECK(cudaEventRecord(end_, stream_));
    cuda::wait_event(comm_, end_, timeout_s_, cuda::deadline_after(timeout_s_), "bench_nccl_rounds: a call");
    float ms = 0;
    STRAGGLAR_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, end_));
    return ms * 1e-3;
  }
  void download(float* dst, std::size_t bytes) override {
    STRAGGLAR_CUDA_CHECK(cudaMemcpy(dst, work_.get(), bytes, cudaMemcpyDeviceToHost));
  }
  void end_point() override {
    executor_.reset();
    cuda_device_.reset();
    transport_obj_.reset();
  }
  void close() override {
    if (stream_ == nullptr) return;
    (void)cudaStreamSynchronize(stream_);
    end_point();
    input_.release();
    work_.release();
    scratch_.release();
    (void)cudaEventDestroy(start_);
    (void)cudaEventDestroy(end_);
    (void)cudaStreamDestroy(stream_);
    stream_ = nullptr;
    for (ncclComm_t& c : comms_)
      if (c != nullptr) {
        (void)ncclCommDestroy(c);
        c = nullptr;
      }
  }
  std::string transport() const override { return transport_; }
  std::string device() const override {
    cudaDeviceProp prop{};
    return cudaGetDeviceProperties(&prop, device_) == cudaSuccess ? std::string(prop.name) : std::string("GPU ?");
  }
  std::string version() const override {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return "NCCL ?";
    return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
  }

 private:
  void sync() { STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  int rank_;
  int device_;
  std::string transport_;
  double timeout_s_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
  std::vector<ncclComm_t> comms_;  // by n
  ncclComm_t comm_ = nullptr;      // the point's
  const Plan* plan_ = nullptr;
  std::size_t count_ = 0;
  DeviceBuffer input_, work_, scratch_;
  std::unique_ptr<NcclTransport> transport_obj_;
  std::unique_ptr<CudaDevice> cuda_device_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* const tool = "bench_nccl_rounds";
  bench::RoundBenchOptions o;
  if (const auto code = bench::parse_round_bench_job(argc, argv, tool, "ncclAllReduce", o)) return *code;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  // Without a GPU nothing is measured, and the exit says so (77), never 0; any other CUDA error fails.
  const gpu_test::CudaPresence gpu = gpu_test::cuda_presence();
  const gpu_test::GpuPlace place = gpu_test::place_on_gpu(gpu, rank, "bench-nccl-rounds-host");
  if (place.worst != 0) {
    if (gpu.kind == gpu_test::CudaPresence::error) std::fprintf(stderr, "[rank %d] %s: %s\n", rank, tool, gpu.detail.c_str());
    if (place.worst == 1 && rank == 0)
      std::fprintf(stderr, "%s: no CUDA device (%s): nothing measured; it needs a GPU\n", tool, gpu.detail.c_str());
    MPI_Finalize();
    return place.worst == 1 ? 77 : 2;
  }
  const int device = place.device;
  const int rc = bench::run_round_bench_job(o, tool, [&]() -> std::unique_ptr<bench::RoundBackend> {
    STRAGGLAR_CUDA_CHECK(cudaSetDevice(device));
    return std::make_unique<NcclBackend>(
        rank, device,
        place.shared ? "NCCL over loopback sockets, " + std::to_string(place.local_size) + " ranks sharing " +
                     std::to_string(gpu.devices) + " GPU(s)"
               : "NCCL (default transports)",
        o.call_timeout_s);
  });
  MPI_Finalize();
  return rc;
}
