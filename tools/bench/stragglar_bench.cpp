// stragglar-bench: AllReduce timings under a straggler on the CPU/MPI runtime, shaped like
// nccl-tests. The benchmark itself (sizes, inputs, checks, timing, calibration, output) is the
// shared engine (engine.hpp); this file is the MPI backend: host buffers, the MPI front-end's
// session, a host sleep for the delayed rank, MPI_Wtime.
//
//   mpirun -np 8 ./build/stragglar-bench -b 64M -e 64M -d float
//          --algo stragglar,ring,native,auto --straggler 7 --delay 300 --calibrate
//
// docs/runtime.md "stragglar-bench".
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine.hpp"
#include "runtime/cpu_device.hpp"
#include "runtime/mpi_session.hpp"

using namespace stragglar;

namespace {

class MpiBackend final : public bench::Backend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm), session_(detail::mpi_session(comm)) {}

  std::string transport() const override {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::string v(version, static_cast<std::size_t>(len));
    v = v.substr(0, v.find_first_of(",\n"));  // "Open MPI v4.1.4"
    return "MPI (" + v + ")";
  }
  void allocate(std::size_t bytes) override {
    work_.assign(bytes, 0);
    input_.assign(bytes, 0);
  }
  void upload_input(const void* host, std::size_t bytes) override { std::memcpy(input_.data(), host, bytes); }
  void upload_work(const void* host, std::size_t bytes) override { std::memcpy(work_.data(), host, bytes); }
  void download_work(void* host, std::size_t bytes) override { std::memcpy(host, work_.data(), bytes); }
  void reset(std::size_t bytes) override { std::memcpy(work_.data(), input_.data(), bytes); }
  void allreduce(std::size_t count, DataType t, ReduceOp op, const Options& o, PhaseSelection phases) override {
    session_.allreduce(work_.data(), work_.data(), count, t, op, o, phases);
  }
  void drain() override {}
  void mark_start() override { start_ = MPI_Wtime(); }
  void sleep(double ms) override { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }
  void mark_entry() override { entry_ = MPI_Wtime() - start_; }
  void mark_exit() override { exit_ = MPI_Wtime() - start_; }
  Times read_times() override { return {exit_, entry_}; }
  detail::Choice last_choice() override { return session_.last_choice(); }
  double time_exchange(std::size_t bytes, int peer) override {
    require(bytes <= static_cast<std::size_t>(INT32_MAX),
            "--calibrate: " + std::to_string(bytes) + " bytes per exchange, expected at most INT_MAX (use a smaller -e)");
    const double t0 = MPI_Wtime();
    if (peer >= 0)
      MPI_Sendrecv(input_.data(), static_cast<int>(bytes), MPI_BYTE, peer, 7, work_.data(), static_cast<int>(bytes),
                   MPI_BYTE, peer, 7, comm_, MPI_STATUS_IGNORE);
    return MPI_Wtime() - t0;
  }
  double time_reduce(std::size_t count, DataType t, ReduceOp op) override {
    const double t0 = MPI_Wtime();
    cpu_reduce(work_.data(), input_.data(), count, t, op);
    return MPI_Wtime() - t0;
  }

 private:
  MPI_Comm comm_;
  detail::Session& session_;
  std::vector<char> work_, input_;
  double start_ = 0, entry_ = 0, exit_ = 0;
};

const bench::Tool kTool{"stragglar-bench", "stragglar-bench: AllReduce under a straggler (run with mpirun -np N)",
                        "host sleep",
                        "Measure alpha, beta (pairwise MPI exchanges) and gamma (the CPU reducer); print the model's "
                        "prediction"};

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  bench::EngineFlags flags;
  if (const auto code = bench::parse_flags(argc, argv, kTool, flags)) {
    MPI_Finalize();
    return *code;
  }
  int rank = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    MpiBackend backend(MPI_COMM_WORLD);
    rc = bench::run(kTool, flags, backend);
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "%s: %s\n", kTool.name, e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}
