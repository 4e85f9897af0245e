// Bounded random-mutation fuzzing of the other inputs from outside: the
// STRAGGLAR_* environment, the bench/CLI value parsers and the bench flags as a command line.
//
//   environment  each case, in a forked child: a random set of STRAGGLAR_* variables (the core's
//                and the UCX engine's) with damaged values, then detail::env(),
//                options_from_env() and UcxOptions::from_env() (when built with UCX). Each must
//                return or throw stragglar::Error: a child that dies of a signal, or throws
//                anything else, fails the case. (env() reads once per process: hence the fork.)
//   values       parse_bytes, parse_duration_s, parse_bandwidth_Bps, parse_algorithm,
//                parse_dtype, parse_reduce_op, parse_pipeline on damaged strings: a value or
//                stragglar::Error, and a parsed size/pipeline inside its documented range.
//   flags        the bench flags (tools/bench_flags.hpp) on damaged argv through CLI11, then
//                the values the engine parses from them: CLI::ParseError or stragglar::Error.
//
// Usage: fuzz_inputs [cases] (default 2000 per part; env STRAGGLAR_FUZZ_SEED). Prints
// "N passed, M failed" and the first failing input.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "../../tools/bench_flags.hpp"
#include "runtime/env.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/types.hpp"
#include "stragglar/units.hpp"
#if STRAGGLAR_FUZZ_UCX
#include "ucx/ucx_transport.hpp"
#endif

namespace {

using namespace stragglar;

struct Rng {  // splitmix64: the same inputs for a seed on every machine
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  int range(int lo, int hi) { return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1)); }
};

const char* const kVariables[] = {"STRAGGLAR_TIMEOUT_S", "STRAGGLAR_DEBUG", "STRAGGLAR_ALPHA_US",
                                  "STRAGGLAR_BANDWIDTH_GBPS", "STRAGGLAR_REDUCE_BANDWIDTH_GBPS",
                                  "STRAGGLAR_VERIFY", "STRAGGLAR_KEEP_BUFFERS",
                                  "STRAGGLAR_ALGORITHM", "STRAGGLAR_STRAGGLER",
                                  "STRAGGLAR_PIPELINE", "STRAGGLAR_AUTO_PERIOD", "STRAGGLAR_MAX_MESSAGE_BYTES",
                                  "STRAGGLAR_UCX_WAIT", "STRAGGLAR_UCX_ERROR_MODE"};

// Values that are valid somewhere, and values that are damaged in the usual ways.
const char* const kSeeds[] = {"", "0", "1", "-1", "5", "60", "0.5", "1e-9", "1e999", "-0", "nan", "inf", "-inf",
                              "2147483647", "2147483648", "-2147483649", "18446744073709551616", "0x10", "1e3",
                              " 5", "5 ", "5x", "abc", "INFO", "info", "WARN", "NONE", "auto", "stragglar", "ring",
                              "rhd", "allpairs", "broadcast", "direct", "native", "AUTO", "Ring", "64M", "1G",
                              "4K", "1.5M", "-1M", "99999999999G", "1024", "backoff", "poll", "yield_poll",
                              "per_host", "peer", "none", "\xff\xfe", "\t", "1,2", "ring:4", "stragglar:0",
                              "stragglar:2000", "10ms", "1s", "3us", "1GB/s", "100Gbps", "1e400s"};

std::string damaged(Rng& rng) {
  std::string v = kSeeds[rng.range(0, static_cast<int>(std::size(kSeeds)) - 1)];
  const int edits = rng.range(0, 3);
  for (int e = 0; e < edits; ++e) {
    switch (rng.range(0, 3)) {
      case 0:
        if (!v.empty()) v[static_cast<std::size_t>(rng.range(0, static_cast<int>(v.size()) - 1))] =
                            static_cast<char>(rng.range(1, 255));
        break;
      case 1:
        if (!v.empty()) v.erase(static_cast<std::size_t>(rng.range(0, static_cast<int>(v.size()) - 1)), 1);
        break;
      case 2:
        v += kSeeds[rng.range(0, static_cast<int>(std::size(kSeeds)) - 1)];
        break;
      default:
        v.insert(0, std::string(static_cast<std::size_t>(rng.range(1, 40)), '9'));
        break;
    }
  }
  return v;
}

long g_passed = 0, g_failed = 0;

void fail(const std::string& what) {
  if (g_failed == 0) std::fprintf(stderr, "FAIL (first): %s\n", what.c_str());
  ++g_failed;
}

// ---- environment ------------------------------------------------------------------------------
void environment_case(Rng& rng) {
  std::vector<std::pair<std::string, std::string>> set;
  const int n = rng.range(1, 4);
  for (int i = 0; i < n; ++i)
    set.emplace_back(kVariables[rng.range(0, static_cast<int>(std::size(kVariables)) - 1)], damaged(rng));
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (const auto& [k, v] : set) ::setenv(k.c_str(), v.c_str(), 1);
    int code = 0;
    try {
      (void)detail::env();
      (void)options_from_env();
#if STRAGGLAR_FUZZ_UCX
      (void)UcxOptions::from_env(60);
#endif
    } catch (const Error&) {
      code = 1;
    } catch (...) {
      code = 3;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::string input;
  for (const auto& [k, v] : set) input += k + "='" + v + "' ";
  if (WIFSIGNALED(status))
    fail("environment " + input + "killed the reader by signal " + std::to_string(WTERMSIG(status)));
  else if (WEXITSTATUS(status) > 1)
    fail("environment " + input + "threw something other than stragglar::Error");
  else
    ++g_passed;
}

// ---- values -----------------------------------------------------------------------------------
template <class F>
void value_case(const char* what, const std::string& text, F&& parse) {
  try {
    parse(text);
    ++g_passed;
  } catch (const Error&) {
    ++g_passed;
  } catch (const std::exception& e) {
    fail(std::string(what) + "('" + text + "') threw " + e.what());
  }
}

void values_case(Rng& rng) {
  const std::string t = damaged(rng);
  value_case("parse_bytes", t, [](const std::string& s) { (void)parse_bytes(s); });
  value_case("parse_duration_s", t, [](const std::string& s) {
    const double v = parse_duration_s(s);
    if (!(v == v)) throw std::runtime_error("NaN accepted");
  });
  value_case("parse_bandwidth_Bps", t, [](const std::string& s) {
    const double v = parse_bandwidth_Bps(s);
    if (!(v == v)) throw std::runtime_error("NaN accepted");
  });
  value_case("parse_algorithm", t, [](const std::string& s) { (void)parse_algorithm(s); });
  value_case("parse_dtype", t, [](const std::string& s) { (void)parse_dtype(s); });
  value_case("parse_reduce_op", t, [](const std::string& s) { (void)parse_reduce_op(s); });
  value_case("parse_pipeline", t, [](const std::string& s) {
    const int k = parse_pipeline(s);
    if (k < 0 || k > kMaxPipeline) throw std::runtime_error("pipeline out of range: " + std::to_string(k));
  });
}

// ---- bench flags ------------------------------------------------------------------------------
const char* const kFlags[] = {"-b", "-e", "-f", "-n", "-w", "-c", "-d", "-o", "--algo", "--straggler", "--delay",
                              "--ideal", "--pipeline", "--json", "--minbytes", "--iters", "-x", "--", "-"};

void flags_case(Rng& rng) {
  std::vector<std::string> args{"bench"};
  const int n = rng.range(0, 8);
  for (int i = 0; i < n; ++i) {
    if (rng.range(0, 2) != 0) args.push_back(kFlags[rng.range(0, static_cast<int>(std::size(kFlags)) - 1)]);
    args.push_back(damaged(rng));
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  std::string input;
  for (const std::string& a : args) input += "'" + a + "' ";
  try {
    CLI::App app("fuzz");
    bench::BenchFlags f;
    bench::add_bench_flags(app, f, "", "");
    app.parse(static_cast<int>(argv.size()), argv.data());
    // What the engine then parses from them.
    (void)parse_bytes(f.min_bytes);
    (void)parse_bytes(f.max_bytes);
    (void)parse_dtype(f.dtype_name);
    (void)parse_reduce_op(f.op_name);
    if (f.pipeline != "auto") (void)bench::parse_pipeline_text(f.pipeline, "--pipeline");
    std::size_t start = 0;
    while (start <= f.algos.size()) {
      const std::size_t comma = std::min(f.algos.find(',', start), f.algos.size());
      const std::string entry = f.algos.substr(start, comma - start);
      const std::size_t colon = entry.find(':');
      (void)parse_algorithm(entry.substr(0, colon));
      if (colon != std::string::npos) (void)bench::parse_pipeline_text(entry.substr(colon + 1), "--algo");
      start = comma + 1;
    }
    ++g_passed;
  } catch (const CLI::Error&) {
    ++g_passed;
  } catch (const Error&) {
    ++g_passed;
  } catch (const std::exception& e) {
    fail("bench flags " + input + "threw " + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const long cases = argc > 1 ? std::atol(argv[1]) : 2000;
  const char* seed_text = std::getenv("STRAGGLAR_FUZZ_SEED");
  Rng rng{seed_text ? std::strtoull(seed_text, nullptr, 10) : 22};
  for (long i = 0; i < cases; ++i) environment_case(rng);
  for (long i = 0; i < cases; ++i) values_case(rng);
  for (long i = 0; i < cases; ++i) flags_case(rng);
  std::printf("fuzz_inputs: %ld passed, %ld failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
