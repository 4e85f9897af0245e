// The MPI front-end's hot path makes no heap allocation (issue #10): after the first calls of a
// configuration (agreement, plan, scratch), 20 more calls of every algorithm — auto included,
// whose exchanges and decisions fall inside those calls — in place and out of place, sum and
// avg, must not call operator new on any rank. This binary replaces
// operator new to count (MPI's own C allocations are malloc and are not counted).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "stragglar/allreduce.hpp"

namespace {
bool g_counting = false;
long g_allocations = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  if (g_counting) ++g_allocations;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t bytes) { return operator new(bytes); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int failures = 0;
  std::vector<float> in(100003, 1.0f), out(in.size());
  for (const stragglar::AlgorithmInfo& row : stragglar::algorithm_table()) {
    // auto included: its decisions allocate nothing either
    stragglar::Options o;
    o.algorithm = row.id;
    auto call = [&](bool in_place, stragglar::ReduceOp op) {
      stragglar::allreduce(in_place ? out.data() : in.data(), out.data(), in.size(), stragglar::DataType::float32, op,
                           MPI_COMM_WORLD, o);
    };
    try {
      for (int i = 0; i < 2; ++i)
        for (bool in_place : {false, true})
          for (auto op : {stragglar::ReduceOp::sum, stragglar::ReduceOp::avg}) call(in_place, op);
      g_counting = true;
      for (int i = 0; i < 20; ++i)
        for (bool in_place : {false, true})
          for (auto op : {stragglar::ReduceOp::sum, stragglar::ReduceOp::avg}) call(in_place, op);
      g_counting = false;
    } catch (const std::exception& e) {
      g_counting = false;
      std::fprintf(stderr, "[rank %d] %s: %s\n", rank, row.name, e.what());
      ++failures;
    }
    long total = 0;
    MPI_Allreduce(&g_allocations, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) std::printf("%-10s %ld heap allocations in 80 calls x %d ranks\n", row.name, total, n);
    if (total != 0) ++failures;
    g_allocations = 0;
  }
  // auto with two ranks late together (issue #23): once the set is learned (its plans built
  // then, after an exchange), calls with the same pattern allocate nothing either.
  if (n >= 4) {
    stragglar::Options o;  // auto
    const bool late = rank >= n - 2;
    auto call = [&] {
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      stragglar::allreduce(in.data(), out.data(), in.size(), stragglar::DataType::float32, stragglar::ReduceOp::sum,
                           MPI_COMM_WORLD, o);
    };
    try {
      for (int i = 0; i < 10; ++i) call();
      g_counting = true;
      for (int i = 0; i < 20; ++i) call();
      g_counting = false;
    } catch (const std::exception& e) {
      g_counting = false;
      std::fprintf(stderr, "[rank %d] auto (late set): %s\n", rank, e.what());
      ++failures;
    }
    long total = 0;
    MPI_Allreduce(&g_allocations, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    const stragglar::StragglerReport rep = stragglar::straggler_report(MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("auto, ranks %d,%d late: %ld heap allocations in 20 calls x %d ranks (late set of %zu learned, %s)\n",
                  n - 2, n - 1, total, n, rep.late_set.size(), stragglar::to_string(rep.algorithm));
    if (total != 0) ++failures;
    g_allocations = 0;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", all ? "FAIL" : "PASS");
  MPI_Finalize();
  return all ? 1 : 0;
}
