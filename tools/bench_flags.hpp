// The nccl-tests-shaped flags of stragglar-bench and stragglar-bench-gpu (their shared runner,
// tools/bench/bench_runner.hpp, adds its own) and of stragglar-ucx-bench, declared once so the tools
// stay one interface. The algorithm names come from the algorithm table.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <string>

#include "stragglar/algorithm.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::bench {

// CLI11's PositiveNumber/NonNegativeNumber name DBL_MAX in full in their messages; these say
// what is expected instead.
inline CLI::Validator number_above(double lo, bool or_equal) {
  return CLI::Validator(
      [lo, or_equal](std::string& in) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(in, v) || !std::isfinite(v)) return "'" + in + "' is not a finite number";
        if (or_equal ? v >= lo : v > lo) return {};
        std::string bound = std::to_string(lo);
        bound.erase(bound.find_last_not_of('0') + 1);
        if (bound.back() == '.') bound.pop_back();
        return in + " is out of range, expected a number " + (or_equal ? ">= " : "> ") + bound;
      },
      or_equal ? "NUMBER >= " + std::to_string(static_cast<long long>(lo)) : "NUMBER > " + std::to_string(static_cast<long long>(lo)));
}

struct BenchFlags {
  std::string min_bytes = "64M", max_bytes = "64M";
  double factor = 2;
  int iters = 20, warmup = 5, check = 1;
  std::string dtype_name = "float", op_name = "sum";
  std::string algos = "stragglar,ring,rhd,allpairs,broadcast,native";
  int straggler = -1;
  double delay_ms = 0;
  bool ideal = false;
  std::string pipeline = "auto";
  std::string json_file;
};

// `algo_extra` adds to the --algo help, `delay_how` says how the straggler waits.
inline void add_bench_flags(CLI::App& app, BenchFlags& f, const std::string& algo_extra, const std::string& delay_how) {
  app.add_option("-b,--minbytes", f.min_bytes, "Smallest size (K/M/G suffixes, binary)")->capture_default_str();
  app.add_option("-e,--maxbytes", f.max_bytes, "Largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", f.factor, "Size multiplication factor")->capture_default_str()->check(number_above(0, false));
  app.add_option("-n,--iters", f.iters, "Timed iterations")->capture_default_str()->check(number_above(1, true));
  app.add_option("-w,--warmup_iters", f.warmup, "Warmup iterations")->capture_default_str()->check(number_above(0, true));
  app.add_option("-c,--check", f.check, "Check results (0/1)")->capture_default_str()->check(CLI::Range(0, 1));
  app.add_option("-d,--datatype", f.dtype_name, "float, double, half, bfloat16, int32, int64")->capture_default_str();
  app.add_option("-o,--op", f.op_name, "sum, prod, min, max, avg")->capture_default_str();
  app.add_option("--algo", f.algos, "Comma-separated, from: " + algorithm_names() + algo_extra)
      ->capture_default_str();
  app.add_option("--straggler", f.straggler, "Straggler rank (-1 = n-1)")->capture_default_str();
  app.add_option("--delay", f.delay_ms, "Straggler delay after the common start, " + delay_how)
      ->capture_default_str()
      ->check(number_above(0, true));
  app.add_flag("--ideal", f.ideal, "Time only the phases that wait for the straggler (ideal case)");
  app.add_option("--pipeline", f.pipeline, "StragglAR chunks per rank K, or auto")->capture_default_str();
  app.add_option("--json", f.json_file, "Write rows as JSON");
}

// parse_pipeline with the flag or --algo entry it came from in the message.
inline int parse_pipeline_text(const std::string& text, const std::string& where) {
  try {
    return parse_pipeline(text);
  } catch (const Error& e) {
    throw Error(e.code(), where + ": " + e.what());
  }
}

}  // namespace stragglar::bench
