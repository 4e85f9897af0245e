// auto's bounded native (MpiEngine::native_allreduce with a bound: MPI_Iallreduce polled against
// the timeout) beside MPI_Allreduce, with a random rank late in every call (docs/auto.md "The
// first calls", the bullet on auto's native). Calls alternate between the two, so a host's drift
// falls on both; exposed time = latest exit − latest entry on the host's steady clock, so every
// rank must run on one machine (checked). Prints both totals and their ratio on rank 0.
//   mpirun -np 8 ./build/bench_native_wait [--iters 24] [--delay-ms 100] [--mib 16] [--out-of-place]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/env.hpp"
#include "runtime/mpi_engine.hpp"

namespace {

long long now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace stragglar;
  using namespace stragglar::detail;
  int iters = 24;
  double delay_ms = 100, mib = 16;
  bool in_place = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--delay-ms" && i + 1 < argc) delay_ms = std::atof(argv[++i]);
    else if (a == "--mib" && i + 1 < argc) mib = std::atof(argv[++i]);
    else if (a == "--out-of-place") in_place = false;
    else {
      std::fprintf(stderr, "bench_native_wait: unknown argument '%s', expected --iters N, --delay-ms D, --mib M, --out-of-place\n",
                   argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  MPI_Comm node;  // the steady clock is one clock only within a machine
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int on_node = 0;
  MPI_Comm_size(node, &on_node);
  MPI_Comm_free(&node);
  if (on_node != n) {
    if (rank == 0)
      std::fprintf(stderr, "bench_native_wait: %d of %d ranks share this machine, expected all (exposed time is read on "
                   "one machine's clock)\n", on_node, n);
    MPI_Finalize();
    return 2;
  }
  MPI_Comm comm;  // the engine's private duplicate, as the MPI front-end makes it
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  {
    MpiEngine engine(comm, env());
    const auto count = static_cast<std::size_t>(mib * (1 << 20) / sizeof(float));
    std::vector<float> send(count, 1.0f), recv(count, 0.0f);
    engine.reserve(count * sizeof(float), false, 64);
    std::mt19937 rng(7);  // the same on every rank: every rank agrees who is late
    double total[2] = {0, 0};
    for (int i = 0; i < 2 * iters + 2; ++i) {  // two warm-up calls, then alternating
      const int late = static_cast<int>(rng() % static_cast<unsigned>(n));
      const int bounded = i % 2;
      std::fill(recv.begin(), recv.end(), 1.0f);  // in place: the input again
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == late) std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(delay_ms * 1000)));
      long long t[2] = {now_ns(), 0};
      if (bounded)
        engine.native_allreduce(in_place ? recv.data() : send.data(), recv.data(), count, DataType::float32, ReduceOp::sum,
                                Engine::NativeBound{60.0, 5}, false);
      else
        MPI_Allreduce(in_place ? MPI_IN_PLACE : send.data(), recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      t[1] = now_ns();
      long long latest[2];
      MPI_Allreduce(t, latest, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
      if (i >= 2) total[bounded] += static_cast<double>(latest[1] - latest[0]) * 1e-6;
    }
    if (rank == 0)
      std::printf("%d ranks, %g MiB %s, a random rank %g ms late, %d calls each: MPI_Allreduce %.1f ms, "
                  "auto's bounded native %.1f ms, ratio %.3f\n",
                  n, mib, in_place ? "in place" : "out of place", delay_ms, iters, total[0], total[1], total[1] / total[0]);
  }
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return 0;
}
