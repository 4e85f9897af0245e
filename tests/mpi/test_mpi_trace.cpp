// The trace of every call (STRAGGLAR_TRACE; src/runtime/call_trace.hpp) through the MPI
// front-end: a known job on a communicator of its own — `fixed` (rank n-1 late before every
// call, algorithm auto) or `moving` (rank c mod n late before call c, StragglAR told nobody, and
// the native collective observed) — then the communicator is freed (its session writes its
// files) and rank 0 checks them: both files parse, every call names the rank made late, and on
// one clock every rank leaves a call after the last rank entered it. Results are checked exact.
// Call 0 has nobody late: the front-end makes the communicator's session in its first call,
// after duplicating the communicator (which waits for every rank), so a first call's trace
// starts when every rank is there (docs/trace.md "Limits").
// `unwritable`: the fixed job with a STRAGGLAR_TRACE that cannot be written (run_trace_unwritable.sh
// checks the one error per process): the results must still be exact.
//   mpirun -np N test_mpi_trace fixed|moving|unwritable PREFIX   (STRAGGLAR_TRACE=PREFIX set by the test)
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "stragglar/allreduce.hpp"
#include "trace_check.hpp"

namespace {

constexpr int kCalls = 9;  // call 0 with nobody late
constexpr std::size_t kCount = 1 << 14;

int run(const std::string& mode, const std::string& prefix, int rank, int n) {
  MPI_Comm job = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &job);
  const auto late = [&](int call) { return call == 0 ? -1 : mode == "moving" ? call % n : n - 1; };
  int wrong = 0;
  std::vector<float> buf(kCount);
  for (int c = 0; c < kCalls; ++c) {
    stragglar::Options o;
    o.algorithm = mode != "moving" ? stragglar::Algorithm::automatic
                  : c % 2 == 0     ? stragglar::Algorithm::stragglar
                                   : stragglar::Algorithm::native;
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1 + c));
    MPI_Barrier(MPI_COMM_WORLD);  // a common start: a rank descheduled before it is not the late rank
    if (rank == late(c)) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    stragglar::allreduce(buf.data(), buf.data(), kCount, stragglar::DataType::float32, stragglar::ReduceOp::sum, job, o);
    const float want = static_cast<float>(n * (n + 1) / 2 + n * c);
    for (float v : buf) wrong += v != want;
  }
  MPI_Comm_free(&job);  // its session ends: every rank's files are written and closed
  int wrong_anywhere = 0;
  MPI_Allreduce(&wrong, &wrong_anywhere, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank != 0) return 0;
  if (wrong_anywhere) {
    std::printf("FAIL: %d wrong elements\n", wrong_anywhere);
    return 1;
  }
  if (mode == "unwritable") {
    std::printf("OK: unwritable trace path, n=%d: %d calls exact\n", n, kCalls);
    return 0;
  }
  std::string problems;
  const int comm = stragglar::testing::only_comm(prefix);
  std::vector<stragglar::testing::RankTrace> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(stragglar::testing::read_rank_trace(prefix, comm, r, problems));
  const std::vector<int> found = stragglar::testing::late_rank_per_call(ranks, problems);
  if (found.size() != static_cast<std::size_t>(kCalls))
    problems += std::to_string(found.size()) + " calls traced, expected " + std::to_string(kCalls) + "\n";
  for (std::size_t c = 1; c < found.size(); ++c)
    if (found[c] != late(static_cast<int>(c)))
      problems += "call " + std::to_string(c) + ": the trace names rank " + std::to_string(found[c]) + " late, rank " +
                  std::to_string(late(static_cast<int>(c))) + " was\n";
  for (const auto& r : ranks)
    if (!r.shared_clock) problems += "a rank's trace says the clock is not shared (one host here)\n";
  if (!problems.empty()) {
    std::printf("FAIL (%s, n=%d):\n%s", mode.c_str(), n, problems.c_str());
    return 1;
  }
  std::printf("OK: %s, n=%d: %d calls, the late rank named on every call\n", mode.c_str(), n, kCalls);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "fixed" && mode != "moving" && mode != "unwritable") {
    if (rank == 0) std::fprintf(stderr, "usage: test_mpi_trace fixed|moving|unwritable PREFIX (with STRAGGLAR_TRACE=PREFIX)\n");
    MPI_Finalize();
    return 2;
  }
  const int rc = run(mode, argv[2], rank, n);
  int worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
