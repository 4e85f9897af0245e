// What a first call costs (docs/runtime.md "First-call costs"): one process per figure, since
// a first call ever happens once per process. Modes:
//   plain   MPI_Allreduce on MPI_COMM_WORLD: its first call, then its steady calls
//   native  stragglar::allreduce with algorithm native: the library's first call ever (the
//           communicator's set-up, host discovery, the argument agreement, MPI's first run)
//   auto    stragglar::allreduce with algorithm auto, after a small call has set the communicator
//           up and an auto call of half the size has paid the process's one-offs: auto's first
//           call of a new configuration, then its steady calls
//   ring, rhd, stragglar, ...  any other algorithm name, as auto: a fixed algorithm's first
//           call of a new configuration (what auto's first call would cost running it)
// Every timed call follows a barrier; a call's time is the longest any rank spent in it. Prints
// one line on rank 0: the first call and the median of the next --calls calls (auto: and the
// two set-up calls' times). Run it several
// times, alternating modes, on a quiet machine (STRAGGLAR_DEBUG=TRACE prints the first call's
// steps):
//   mpirun -np 8 ./build/bench_first_call --mode native [--mib 16] [--calls 20] [--out-of-place]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "stragglar/allreduce.hpp"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "native";
  double mib = 16;
  int calls = 20;
  bool in_place = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) mode = argv[++i];
    else if (a == "--mib" && i + 1 < argc) mib = std::atof(argv[++i]);
    else if (a == "--calls" && i + 1 < argc) calls = std::atoi(argv[++i]);
    else if (a == "--out-of-place") in_place = false;
    else {
      std::fprintf(stderr, "bench_first_call: unknown argument '%s', expected --mode plain|native|auto|<algorithm>, --mib M, "
                   "--calls N, --out-of-place\n", argv[i]);
      return 2;
    }
  }
  stragglar::Options opts;
  if (mode != "plain") {
    try {
      opts = stragglar::options_for(mode);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_first_call: --mode '%s' is not valid, expected plain or an algorithm name: %s\n",
                   mode.c_str(), e.what());
      return 2;
    }
  }
  const bool configuration_first = mode != "plain" && mode != "native";
  if (calls < 1 || mib <= 0) {
    std::fprintf(stderr, "bench_first_call: --calls %d / --mib %g, expected at least 1 call and a positive size\n",
                 calls, mib);
    return 2;
  }
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const auto count = static_cast<std::size_t>(mib * (1 << 20) / sizeof(float));
  std::vector<float> send(count, 1.0f), recv(count, 1.0f);
  // auto: the communicator's set-up (one float, native), then the process's first auto
  // configuration (half the size: the one-offs of a process, such as the MPI tool interface),
  // each timed; then the measured configuration is a new one, as in a job with many sizes.
  double set_up_ms[2] = {0, 0};
  if (configuration_first) {
    stragglar::Options native;
    native.algorithm = stragglar::Algorithm::native;
    std::vector<float> half(count / 2, 1.0f);
    for (int step = 0; step < 2; ++step) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = now_ms();
      stragglar::allreduce(MPI_IN_PLACE, half.data(), step == 0 ? 1 : half.size(), stragglar::DataType::float32,
                           stragglar::ReduceOp::sum, MPI_COMM_WORLD, step == 0 ? native : opts);
      const double mine = now_ms() - t0;
      MPI_Allreduce(&mine, &set_up_ms[step], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
  }
  std::vector<double> times;
  for (int i = 0; i <= calls; ++i) {
    std::fill(recv.begin(), recv.end(), 1.0f);  // in place: the input again, no overflow
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_ms();
    const void* s = in_place ? MPI_IN_PLACE : static_cast<const void*>(send.data());
    if (mode == "plain")
      MPI_Allreduce(s, recv.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else
      stragglar::allreduce(s, recv.data(), count, stragglar::DataType::float32, stragglar::ReduceOp::sum,
                           MPI_COMM_WORLD, opts);
    double mine = now_ms() - t0, longest = 0;
    MPI_Allreduce(&mine, &longest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    times.push_back(longest);
  }
  if (recv[0] != static_cast<float>(n)) {
    std::fprintf(stderr, "bench_first_call: rank %d got %g, expected %d\n", rank, static_cast<double>(recv[0]), n);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) {
    std::vector<double> steady(times.begin() + 1, times.end());
    std::nth_element(steady.begin(), steady.begin() + static_cast<long>(steady.size() / 2), steady.end());
    std::printf("bench_first_call mode=%s n=%d %g MiB float %s: first %.1f ms, steady %.1f ms (median of %d)",
                mode.c_str(), n, mib, in_place ? "in place" : "out of place", times[0],
                steady[steady.size() / 2], calls);
    if (configuration_first)
      std::printf("; before it: the communicator's first call (one float, native) %.1f ms, the process's first "
                  "configuration (%g MiB) %.1f ms", set_up_ms[0], mib / 2, set_up_ms[1]);
    double total = 0;
    for (double t : times) total += t;
    std::printf("; all %d calls %.1f ms:", calls + 1, total);
    for (double t : times) std::printf(" %.0f", t);
    std::printf("\n");
  }
  MPI_Finalize();
  return 0;
}
