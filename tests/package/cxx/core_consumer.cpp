// Consumer of stragglar::core from an installed package: synthesize every algorithm's
// schedule, verify it, run it on integer data (every transfer applied as the model defines it)
// and check that every rank ends with the exact sum; JSON round trip, compile, simulate, and
// the error a user gets for a bad argument.
#include <stragglar/config.hpp>
#include <stragglar/error.hpp>
#include <stragglar/plan.hpp>
#include <stragglar/schedule_json.hpp>
#include <stragglar/simulate.hpp>
#include <stragglar/synthesize.hpp>
#include <stragglar/verify.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int failures = 0;

void check(bool ok, const char* what, const stragglar::Schedule& s) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s (%s, n=%d)\n", what, s.algorithm.c_str(), s.nranks);
    ++failures;
  }
}

// Runs `s` on `count` int64 elements per rank: rank r starts with r*1000003 + i at element i.
// All transfers of a round read the state from before the round (the schedule model).
bool run_exact(const stragglar::Schedule& s, std::size_t count) {
  const auto n = static_cast<std::size_t>(s.nranks);
  std::vector<std::vector<std::int64_t>> data(n, std::vector<std::int64_t>(count));
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t i = 0; i < count; ++i) data[r][i] = static_cast<std::int64_t>(r * 1000003 + i);
  for (const stragglar::Phase& phase : s.phases) {
    for (const stragglar::Round& round : phase.rounds) {
      const auto before = data;
      for (const stragglar::Transfer& t : round) {
        for (int chunk : t.chunks) {
          const stragglar::ElementRange range = stragglar::chunk_range(count, s.nchunks, chunk);
          for (std::size_t i = range.begin; i < range.end; ++i) {
            const std::int64_t v = before[static_cast<std::size_t>(t.src)][i];
            std::int64_t& dst = data[static_cast<std::size_t>(t.dst)][i];
            dst = t.op == stragglar::TransferOp::reduce ? dst + v : v;
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < count; ++i) {
    std::int64_t want = 0;
    for (std::size_t r = 0; r < n; ++r) want += static_cast<std::int64_t>(r * 1000003 + i);
    for (std::size_t r = 0; r < n; ++r)
      if (data[r][i] != want) return false;
  }
  return true;
}

}  // namespace

int main() {
  std::printf("stragglar %s (MPI %d, CUDA %d)\n", STRAGGLAR_VERSION, STRAGGLAR_HAVE_MPI, STRAGGLAR_HAVE_CUDA);
  int checked = 0;
  for (stragglar::Algorithm algo : stragglar::scheduled_algorithms()) {
    for (int n : {2, 5, 8}) {
      stragglar::SynthOptions opts;
      opts.straggler = n / 2;
      opts.pipeline = 2;
      const stragglar::Schedule s = stragglar::synthesize(algo, n, opts);
      const stragglar::VerifyReport report = stragglar::verify(s);
      check(report.ok, report.message.c_str(), s);
      check(run_exact(s, 1009), "run on data: not the exact sum on every rank", s);
      check(stragglar::schedule_from_json(stragglar::schedule_to_json(s)) == s, "JSON round trip", s);
      for (int rank = 0; rank < n; ++rank)
        check(stragglar::compile(s, rank).rank == rank, "compile", s);
      const stragglar::SimResult sim =
          stragglar::simulate(s, std::size_t{64} << 20, stragglar::CostModel{}, stragglar::Delay{true, 0});
      check(sim.rounds == s.total_rounds() && sim.time_s > 0, "simulate", s);
      ++checked;
    }
  }
  try {
    (void)stragglar::synthesize(stragglar::Algorithm::ring, 1);
    std::fprintf(stderr, "FAIL: synthesize(ring, 1) did not throw\n");
    ++failures;
  } catch (const stragglar::Error& e) {
    if (e.code() != stragglar::ErrorCode::InvalidUsage) {
      std::fprintf(stderr, "FAIL: synthesize(ring, 1): %s: %s\n", stragglar::to_string(e.code()), e.what());
      ++failures;
    }
  }
  if (failures != 0) return EXIT_FAILURE;
  std::printf("core consumer: %d schedules synthesized, verified and run exactly\n", checked);
  return EXIT_SUCCESS;
}
