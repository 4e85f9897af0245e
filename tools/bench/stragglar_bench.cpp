// stragglar-bench: AllReduce timings under a straggler on the CPU/MPI runtime, shaped like
// nccl-tests. The benchmark itself (sizes, inputs, checks, timing, calibration, output) is the
// shared runner (bench_runner.hpp); this file is the MPI backend: the MPI front-end's session on the
// runner's host buffers (HostBackend: host sleep for the delayed rank, MPI_Wtime).
//
//   mpirun -np 8 ./build/stragglar-bench -b 64M -e 64M -d float
//          --algo stragglar,ring,native,auto --straggler 7 --delay 300 --calibrate
//
// docs/runtime.md "stragglar-bench".
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>

#include "bench_runner.hpp"
#include "runtime/mpi_session.hpp"

using namespace stragglar;

namespace {

class MpiBackend final : public bench::HostBackend {
 public:
  explicit MpiBackend(MPI_Comm comm) : comm_(comm), session_(detail::mpi_session(comm)) {}

  std::string transport() const override { return "MPI (" + bench::mpi_library() + ")"; }
  void allreduce(std::size_t count, DataType t, ReduceOp op, const Options& o, PhaseSelection phases) override {
    session_.allreduce(work(), work(), count, t, op, o, phases);
  }
  detail::Choice last_choice() override { return session_.last_choice(); }
  void keep_buffers(bool keep) override { session_.set_caller_sees_buffers_after_errors(keep); }
  double time_exchange(std::size_t bytes, int peer) override {
    require(bytes <= static_cast<std::size_t>(INT32_MAX),
            "--calibrate: " + std::to_string(bytes) + " bytes per exchange, expected at most INT_MAX (use a smaller -e)");
    const double t0 = MPI_Wtime();
    if (peer >= 0)
      MPI_Sendrecv(input(), static_cast<int>(bytes), MPI_BYTE, peer, 7, work(), static_cast<int>(bytes), MPI_BYTE,
                   peer, 7, comm_, MPI_STATUS_IGNORE);
    return MPI_Wtime() - t0;
  }

 private:
  MPI_Comm comm_;
  detail::Session& session_;
};

const bench::Tool kTool{"stragglar-bench", "stragglar-bench: AllReduce under a straggler (run with mpirun -np N)",
                        "host sleep",
                        "Measure alpha, beta (pairwise MPI exchanges) and gamma (the CPU reducer); print the model's "
                        "prediction"};

}  // namespace

int main(int argc, char** argv) {
  return bench::main_with(argc, argv, kTool, [] { return std::make_unique<MpiBackend>(MPI_COMM_WORLD); });
}
