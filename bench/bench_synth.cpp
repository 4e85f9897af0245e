// Google Benchmark of StragglAR synthesis (targets: n=256 ≤ 300 ms, ≤ 5 ms for 2^k;
// n=192 ≤ 300 ms; n=96 ≤ 50 ms; n=168: the slowest n ≤ 256 (min-cost flow); n=254: the
// near-power-of-two builder with the most ranks). Reports the allreduce rounds and the bound.
#include <benchmark/benchmark.h>

#include "stragglar/synthesize.hpp"

namespace {

void BM_SynthesizeStragglar(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  int rounds = 0;
  for (auto _ : state) {
    stragglar::Schedule s = stragglar::synthesize(stragglar::Algorithm::stragglar, n);
    rounds = static_cast<int>(s.phases.back().rounds.size());
    benchmark::DoNotOptimize(s);
  }
  state.counters["allreduce_rounds"] = rounds;
  state.counters["bound"] = stragglar::stragglar_round_bound(n);
}
BENCHMARK(BM_SynthesizeStragglar)->Arg(8)->Arg(64)->Arg(96)->Arg(168)->Arg(192)->Arg(254)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

// Straggler at 0: adds the relabeling pass.
void BM_SynthesizeStragglarRelabeled(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  stragglar::SynthOptions o;
  o.straggler = 0;
  for (auto _ : state) benchmark::DoNotOptimize(stragglar::synthesize(stragglar::Algorithm::stragglar, n, o));
}
BENCHMARK(BM_SynthesizeStragglarRelabeled)->Arg(8)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
