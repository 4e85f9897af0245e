// Google Benchmark of the plan cache at scale: a rank's first call of a configuration
// (synthesize + verify + compile its plan) and a straggler switch (the plan for a new straggler,
// derived from the cached canonical schedule), StragglAR K = 1, n = 256, 1024, 4096.
// Targets (2-core dev machine, Release): n = 1024 first call <= 100 ms, switch <= 5 ms;
// n = 4096 first call <= 1 s, switch <= 20 ms. Peak memory: measure the process with
// /usr/bin/time -v and --benchmark_filter for one n (docs/verification.md).
#include <benchmark/benchmark.h>

#include "plan/plan_cache.hpp"
#include "schedule/packed_schedule.hpp"

namespace {

using stragglar::Algorithm;
using stragglar::detail::ScheduleKey;

void BM_FirstCall(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    stragglar::detail::clear_plan_cache();
    state.ResumeTiming();
    benchmark::DoNotOptimize(stragglar::detail::cached_plan(ScheduleKey{Algorithm::stragglar, n, n - 1, 1}, 0));
  }
  const auto canonical = stragglar::detail::cached_canonical(ScheduleKey{Algorithm::stragglar, n, n - 1, 1});
  state.counters["transfers"] = static_cast<double>(canonical->ntransfers());
  state.counters["packed_MB"] = static_cast<double>(canonical->memory_bytes()) / 1e6;
}
BENCHMARK(BM_FirstCall)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond)->Iterations(3);

// Each iteration moves the straggler to a rank not seen before: no cached plan helps.
void BM_StragglerSwitch(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  stragglar::detail::clear_plan_cache();
  stragglar::detail::cached_plan(ScheduleKey{Algorithm::stragglar, n, n - 1, 1}, 0);  // the first call
  int straggler = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stragglar::detail::cached_plan(ScheduleKey{Algorithm::stragglar, n, straggler, 1}, 0));
    straggler = (straggler + 7) % (n - 1);
  }
}
BENCHMARK(BM_StragglerSwitch)->Arg(256)->Arg(1024)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
