// Arrival tickets between MPI processes (shared_block.hpp + arrival_tickets.hpp): on one host
// the block is shared, and over many calls with a random late rank (or two) every process reads
// the same decision and a late rank holds the last tickets. Prints "arrival tickets: OK" and
// exits 0, or names the first disagreement and exits 1. Nothing is timed.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "runtime/arrival_tickets.hpp"
#include "runtime/shared_block.hpp"

using stragglar::detail::ArrivalDecision;
using stragglar::detail::ArrivalTickets;
using stragglar::detail::SharedBlock;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int failed = 0;
  {
    SharedBlock block(ArrivalTickets::bytes(n), rank, [](std::span<std::int64_t> v) {
      MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    });
    if (!block.data()) {
      if (rank == 0) std::printf("arrival tickets: no shared block on one host: %s\n", block.why().c_str());
      failed = 1;
    } else {
      ArrivalTickets tickets(block.data(), n, rank);
      constexpr int kCalls = 400;
      const std::vector<double> grace = {200e-6, 400e-6};
      // Per call: all_in_time, the late set as a bitmask (n <= 64 here), this rank's ticket.
      std::vector<std::int64_t> mine(3 * kCalls);
      std::mt19937_64 shared(7);  // the same draws on every rank: who is behind
      std::mt19937_64 own(100 + static_cast<std::uint64_t>(rank));
      for (int c = 0; c < kCalls; ++c) {
        const int behind = static_cast<int>(shared() % static_cast<std::uint64_t>(2 * n));
        const int behind2 = static_cast<int>(shared() % static_cast<std::uint64_t>(4 * n));
        int wait_us = static_cast<int>(own() % 50);
        if (rank == behind) wait_us += 2000;
        if (rank == behind2) wait_us += 2000;
        std::this_thread::sleep_for(std::chrono::microseconds(wait_us));
        const ArrivalDecision d = tickets.arrive(c, grace, 60.0);
        std::int64_t mask = 0;
        for (int r : d.late) mask |= std::int64_t{1} << r;
        if (d.i_am_late != ((mask >> rank) & 1)) failed = 1;
        mine[3 * static_cast<std::size_t>(c)] = d.all_in_time;
        mine[3 * static_cast<std::size_t>(c) + 1] = mask;
        mine[3 * static_cast<std::size_t>(c) + 2] = d.ticket;
        MPI_Barrier(MPI_COMM_WORLD);  // the AllReduce: nobody leaves before everyone entered
      }
      std::vector<std::int64_t> all(mine.size() * static_cast<std::size_t>(n));
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_INT64_T, all.data(), static_cast<int>(mine.size()),
                    MPI_INT64_T, MPI_COMM_WORLD);
      int late_calls = 0;
      for (int c = 0; c < kCalls && !failed; ++c) {
        auto at = [&](int r, int f) { return all[static_cast<std::size_t>(r) * mine.size() + 3 * static_cast<std::size_t>(c) + f]; };
        const int late_count = __builtin_popcountll(static_cast<unsigned long long>(at(0, 1)));
        for (int r = 0; r < n; ++r) {
          if (at(r, 0) != at(0, 0) || at(r, 1) != at(0, 1)) {
            if (rank == 0) std::printf("call %d: rank %d decided differently from rank 0\n", c, r);
            failed = 1;
          }
          if ((at(0, 1) >> r & 1) && at(r, 2) < n - late_count) {
            if (rank == 0) std::printf("call %d: late rank %d holds ticket %lld\n", c, r, static_cast<long long>(at(r, 2)));
            failed = 1;
          }
        }
        late_calls += at(0, 0) == 0;
      }
      if (rank == 0 && !failed)
        std::printf("arrival tickets: OK (n %d, %d calls, %d went on without a late rank)\n", n, kCalls, late_calls);
    }
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
