// The MPI front-end's hot path makes no heap allocation: after the first calls of a
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
#include <set>
#include <string>
#include <utility>
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
// The nothrow forms too (std::stable_sort's temporary buffer uses them): all of operator new
// must pair with the operator delete above, or ASan reports new-vs-free mismatches.
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return operator new(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t& t) noexcept { return operator new(bytes, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

// Late sets auto's configurations were told (StragglerReport::late_set after each call), per op:
// here each op is one configuration. The first time a configuration is told a set (a
// set of ranks late together, here possibly made by the scheduler of an oversubscribed host), the
// set's plans and simulations are built, once, at most 8 sets per configuration.
std::set<std::pair<int, std::vector<int>>> g_sets_told;
long g_new_sets = 0;
void note_late_set(stragglar::ReduceOp op) {
  const bool counting = g_counting;
  g_counting = false;
  const std::vector<int> set = stragglar::straggler_report(MPI_COMM_WORLD).late_set;
  if (!set.empty() && g_sets_told.insert({static_cast<int>(op), set}).second) ++g_new_sets;
  g_counting = counting;
}

// Allocations in the counted calls: none, unless a configuration was told a new late set in them.
// Returns whether the calls failed the check; prints the reason.
bool allocations_fail(const char* what, long allocations, long sets_before, int rank, int n) {
  long total = 0, learned = 0, mine = g_new_sets - sets_before;
  MPI_Allreduce(&allocations, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &learned, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("%-10s %ld heap allocations in the counted calls x %d ranks%s\n", what, total, n,
                learned ? (" (allowed: " + std::to_string(learned / n) + " late set(s) learned in them)").c_str() : "");
  return total != 0 && learned == 0;
}

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
      note_late_set(op);
    };
    long sets_before = 0;
    try {
      for (int i = 0; i < 2; ++i)
        for (bool in_place : {false, true})
          for (auto op : {stragglar::ReduceOp::sum, stragglar::ReduceOp::avg}) call(in_place, op);
      sets_before = g_new_sets;
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
    if (allocations_fail(row.name, g_allocations, sets_before, rank, n)) ++failures;
    g_allocations = 0;
  }
  // auto with two ranks late together: once the set is learned (its plans built
  // then, after an exchange), calls with the same pattern allocate nothing either.
  if (n >= 4) {
    stragglar::Options o;  // auto
    const bool late = rank >= n - 2;
    auto call = [&] {
      if (late) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      stragglar::allreduce(in.data(), out.data(), in.size(), stragglar::DataType::float32, stragglar::ReduceOp::sum,
                           MPI_COMM_WORLD, o);
      note_late_set(stragglar::ReduceOp::sum);
    };
    long sets_before = 0;
    try {
      // At least 10 calls, and until the set is learned (the report is the same on every rank).
      for (int i = 0; i < 40 && (i < 10 || stragglar::straggler_report(MPI_COMM_WORLD).late_set.empty()); ++i) call();
      sets_before = g_new_sets;
      g_counting = true;
      for (int i = 0; i < 20; ++i) call();
      g_counting = false;
    } catch (const std::exception& e) {
      g_counting = false;
      std::fprintf(stderr, "[rank %d] auto (late set): %s\n", rank, e.what());
      ++failures;
    }
    const stragglar::StragglerReport rep = stragglar::straggler_report(MPI_COMM_WORLD);
    const std::string what = "auto, ranks " + std::to_string(n - 2) + "," + std::to_string(n - 1) + " late (set of " +
                             std::to_string(rep.late_set.size()) + " learned, " + stragglar::to_string(rep.algorithm) + "):";
    if (allocations_fail(what.c_str(), g_allocations, sets_before, rank, n)) ++failures;
    g_allocations = 0;
  }
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("%s\n", all ? "FAIL" : "PASS");
  MPI_Finalize();
  return all ? 1 : 0;
}
