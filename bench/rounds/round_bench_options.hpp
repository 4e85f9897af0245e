// The per-round benchmark's flags, when a point stops calling, and how a point's samples become
// a row of the stragglar-round-costs/1 table (round_costs.hpp): shared by bench_nccl_rounds
// (GPU) and bench_mpi_rounds (CPU), unit-tested in tests/unit/test_round_bench_options.cpp.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "stragglar/round_costs.hpp"

namespace stragglar::bench {

struct RoundBenchOptions {
  std::vector<int> nranks;              // communicator sizes: ranks 0..n-1 of the job
  std::vector<std::size_t> sizes;       // bytes per call (float elements)
  std::vector<std::string> algorithms;  // scheduled algorithms, or native (the backend's own call: rounds = 1)
  int pipeline = 1;                     // StragglAR's K
  int warmup = 1;                       // untimed calls before a (n, algorithm)'s first size
  int iters = 5;                        // timed calls per point, at most
  int min_iters = 1;                    // ... and at least
  double point_s = 0.5;                 // no call starts after this long into a point once min_iters ran
  double deadline_s = 0;                // 0: none; else no point starts after this long (the rest is listed as skipped)
  double call_timeout_s = 120;          // one call's wait on its stream
  std::string json;                     // --json FILE
};

// Parses argv of `tool` for a job of `world` ranks. Returns the exit code to stop with: 0 after
// --help (printed to `out`), 2 after a bad flag (the reason printed to `err`, naming the value
// and what was expected); nullopt to go on. `native`: what --algo native runs, for the help.
std::optional<int> parse_round_bench_flags(int argc, const char* const* argv, int world, const std::string& tool,
                                           const std::string& native, RoundBenchOptions& o, std::ostream& out,
                                           std::ostream& err);

// Whether a point makes another timed call after `done` of them, `elapsed_s` into the point.
bool another_call(const RoundBenchOptions& o, int done, double elapsed_s);

// One point's samples, gathered from its ranks: per rank its rounds, per rank and call the
// host enqueue time and the GPU time of the whole call (seconds).
struct PointSamples {
  std::vector<int> rounds;                     // per rank
  std::vector<std::vector<double>> host_call;  // [rank][call]
  std::vector<std::vector<double>> gpu_call;   // [rank][call]; empty: not measured
  long long wrong = 0;
};
// The row: per-round times are each sample divided by its rank's rounds, then the median over
// ranks × calls (min and max too); per-call times the median of the samples.
RoundCostRow summarize_point(const std::string& algorithm, int nranks, std::size_t bytes, const PointSamples& s);

double median(std::vector<double> v);

}  // namespace stragglar::bench
