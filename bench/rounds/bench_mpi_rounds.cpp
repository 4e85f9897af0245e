// bench_mpi_rounds: bench_nccl_rounds' run (round_bench_runner.hpp) on CPUs — the Executor over
// MpiTransport + CpuDevice, native = MPI_Allreduce. A round here is waited for before the next
// (the CPU executor blocks in each exchange), so "host per round" is the whole round, not an
// enqueue time: it is what a host engine's round costs. It also runs the benchmark's whole run
// (groups, decisions, checks, gathers, the table and its JSON) without a GPU (CTest round_bench_mpi).
//
//   mpirun -np 4 ./bench_mpi_rounds [--nranks 2-4] [--sizes 1K,64K] [--algo stragglar,ring,native] [--json F]
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "round_bench_options.hpp"
#include "round_bench_runner.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/executor.hpp"
#include "runtime/mpi_transport.hpp"

using namespace stragglar;

namespace {

// CpuDevice memory (64-byte aligned, as the executor's scratch must be), grown on demand.
class HostBuffer {
 public:
  explicit HostBuffer(CpuDevice& d) : d_(d) {}
  ~HostBuffer() { d_.deallocate(p_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    d_.deallocate(p_);
    p_ = d_.allocate(bytes);
    size_ = bytes;
  }
  void* get() const { return p_; }
  std::size_t size() const { return size_; }

 private:
  CpuDevice& d_;
  void* p_ = nullptr;
  std::size_t size_ = 0;
};

class MpiBackend final : public bench::RoundBackend {
 public:
  explicit MpiBackend(double timeout_s) : timeout_s_(timeout_s) {}
  ~MpiBackend() override { close(); }
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  // The transport gets a communicator of its own, with MPI_ERRORS_RETURN (MpiTransport's rule).
  void add_group(int n, MPI_Comm comm) override {
    if (static_cast<int>(comms_.size()) <= n) comms_.resize(static_cast<std::size_t>(n) + 1, MPI_COMM_NULL);
    if (comm == MPI_COMM_NULL) return;
    MPI_Comm own = MPI_COMM_NULL;
    MPI_Comm_dup(comm, &own);
    MPI_Comm_set_errhandler(own, MPI_ERRORS_RETURN);
    comms_[static_cast<std::size_t>(n)] = own;
  }
  void prepare(std::size_t bytes, float value) override {
    input_.reserve(bytes);
    work_.reserve(bytes);
    auto* in = static_cast<float*>(input_.get());
    for (std::size_t i = 0; i < bytes / sizeof(float); ++i) in[i] = value;
  }
  void begin_point(int n, const Plan* plan, std::size_t count) override {
    comm_ = comms_.at(static_cast<std::size_t>(n));
    plan_ = plan;
    count_ = count;
    if (plan != nullptr) scratch_.reserve(std::max<std::size_t>(Executor::scratch_bytes(*plan, count, DataType::float32), 64));
    transport_ = std::make_unique<MpiTransport>(comm_, timeout_s_);
    executor_ = std::make_unique<Executor>(*transport_, device_);
  }
  void reset() override { std::memcpy(work_.get(), input_.get(), count_ * sizeof(float)); }
  void mark_start() override {}
  void call() override {
    if (plan_ == nullptr)
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, work_.get(), static_cast<int>(count_), MPI_FLOAT, MPI_SUM, comm_),
                "MPI_Allreduce");
    else
      executor_->run(*plan_, work_.get(), count_, DataType::float32, ReduceOp::sum, scratch_.get(), scratch_.size());
  }
  double finish() override { return -1; }  // done when call() returned; no device clock
  void download(float* dst, std::size_t bytes) override { std::memcpy(dst, work_.get(), bytes); }
  void end_point() override {
    executor_.reset();
    transport_.reset();
  }
  void close() override {
    end_point();
    for (MPI_Comm& c : comms_)
      if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
  }
  std::string transport() const override { return "MPI point-to-point (MpiTransport), CPU reductions"; }
  std::string device() const override { return "CPU"; }
  std::string version() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, static_cast<std::size_t>(len));
    return s.substr(0, s.find_first_of(",\n"));
  }

 private:
  double timeout_s_;
  CpuDevice device_;
  HostBuffer input_{device_}, work_{device_}, scratch_{device_};
  std::vector<MPI_Comm> comms_;  // by n
  MPI_Comm comm_ = MPI_COMM_NULL;
  const Plan* plan_ = nullptr;
  std::size_t count_ = 0;
  std::unique_ptr<MpiTransport> transport_;
  std::unique_ptr<Executor> executor_;
};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const char* const tool = "bench_mpi_rounds";
  bench::RoundBenchOptions o;
  if (const auto code = bench::parse_round_bench_job(argc, argv, tool, "MPI_Allreduce", o)) return *code;
  const int rc = bench::run_round_bench_job(o, tool, [&o] { return std::make_unique<MpiBackend>(o.call_timeout_s); });
  MPI_Finalize();
  return rc;
}
