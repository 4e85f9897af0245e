// The per-round benchmark's flags, stopping rule and row summary (round_bench_options.hpp).
#include "round_bench_options.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <ostream>
#include <sstream>

#include "stragglar/algorithm.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"

namespace stragglar::bench {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) items.push_back(item);
  return items;
}

int integer(const std::string& item, const std::string& flag) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(item, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(!item.empty() && used == item.size(), flag + ": '" + item + "' is not an integer");
  return v;
}

// "2-8" or "2,4,8" (or "2-4,8"), each in [2, world].
std::vector<int> parse_ranks(const std::string& text, int world) {
  std::vector<int> out;
  for (const std::string& item : split(text)) {
    const std::size_t dash = item.find('-');
    const int lo = integer(item.substr(0, dash), "--nranks " + text);
    const int hi = dash == std::string::npos ? lo : integer(item.substr(dash + 1), "--nranks " + text);
    require(lo <= hi, "--nranks " + text + ": '" + item + "' is an empty range, expected LO-HI with LO <= HI");
    for (int n = lo; n <= hi; ++n) {
      require(n >= 2 && n <= world, "--nranks " + text + ": " + std::to_string(n) + " ranks, expected 2.." +
                                        std::to_string(world) + " (the job has " + std::to_string(world) + ")");
      if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
    }
  }
  require(!out.empty(), "--nranks '" + text + "': no rank count, expected e.g. 2-8 or 2,4,8");
  std::sort(out.begin(), out.end());
  return out;
}

void check_size(std::size_t bytes, const std::string& text) {
  require(bytes > 0 && bytes % sizeof(float) == 0,
          "size " + text + " = " + std::to_string(bytes) + " bytes, expected a positive multiple of 4 (float elements)");
}

}  // namespace

std::optional<int> parse_round_bench_flags(int argc, const char* const* argv, int world, const std::string& tool,
                                           const std::string& native, RoundBenchOptions& o, std::ostream& out,
                                           std::ostream& err) {
  CLI::App app{tool + ": the host's time per round of stragglar's executor (and the device's time per round), per "
               "algorithm, rank count and size; one MPI process per rank (docs/gpu.md \"The simulator's GPU model\")"};
  std::string ranks, sizes, min_bytes = "1K", max_bytes = "256M", algos = "stragglar,ring";
  double factor = 4;
  app.add_option("--nranks", ranks, "rank counts: a range 2-8 or a list 2,4,8 (default: 2 to the job's size)");
  app.add_option("--sizes", sizes, "bytes per call, a list (1K,64K,256M); instead of -b/-e/-f");
  app.add_option("-b,--minbytes", min_bytes, "smallest size")->capture_default_str();
  app.add_option("-e,--maxbytes", max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "size factor from one size to the next")->capture_default_str();
  app.add_option("--algo", algos, "algorithms with a schedule (stragglar, ring, rhd ...) or native (" + native + ")")
      ->capture_default_str();
  app.add_option("--pipeline,-k", o.pipeline, "StragglAR's chunks per rank K")->capture_default_str();
  app.add_option("-w,--warmup", o.warmup, "untimed calls before the first size of each algorithm and n")
      ->capture_default_str();
  app.add_option("-n,--iters", o.iters, "timed calls per point, at most")->capture_default_str();
  app.add_option("--min-iters", o.min_iters, "timed calls per point, at least")->capture_default_str();
  app.add_option("--point-seconds", o.point_s, "no timed call starts this long into a point once --min-iters ran")
      ->capture_default_str();
  app.add_option("--deadline", o.deadline_s,
                 "seconds: no point starts after this long; the JSON lists the rest as skipped (0: none)")
      ->capture_default_str();
  app.add_option("--call-timeout", o.call_timeout_s, "seconds a call may take on its stream")->capture_default_str();
  app.add_option("--json", o.json, "write the table as stragglar-round-costs/1 JSON here");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    return code == 0 ? 0 : 2;
  }
  try {
    require(world >= 2, "the job has " + std::to_string(world) +
                            " rank, expected at least 2: one MPI process per rank (mpirun -np 8 ...)");
    o.nranks = parse_ranks(ranks.empty() ? "2-" + std::to_string(world) : ranks, world);
    o.sizes.clear();
    if (!sizes.empty()) {
      for (const std::string& s : split(sizes)) {
        o.sizes.push_back(parse_bytes(s));
        check_size(o.sizes.back(), s);
      }
      require(!o.sizes.empty(), "--sizes '" + sizes + "': no size, expected e.g. 1K,64K,256M");
    } else {
      const std::size_t lo = parse_bytes(min_bytes), hi = parse_bytes(max_bytes);
      check_size(lo, min_bytes);
      check_size(hi, max_bytes);
      require(lo <= hi, "-b " + min_bytes + " is larger than -e " + max_bytes + ", expected -b <= -e");
      require(factor > 1 && std::isfinite(factor), "-f " + std::to_string(factor) + ": expected a factor > 1");
      for (double b = static_cast<double>(lo); b <= static_cast<double>(hi) * (1 + 1e-12); b *= factor)
        o.sizes.push_back(static_cast<std::size_t>(std::llround(b)) / sizeof(float) * sizeof(float));
    }
    o.algorithms = split(algos);
    require(!o.algorithms.empty(), "--algo '" + algos + "': no algorithm, expected e.g. stragglar,ring");
    require(o.pipeline >= 1, "--pipeline " + std::to_string(o.pipeline) + ": expected K >= 1");
    for (const std::string& a : o.algorithms) {
      if (a == "native") continue;
      SynthOptions so;
      so.pipeline = o.pipeline;
      for (int n : o.nranks) {
        so.straggler = n - 1;
        try {
          (void)synthesize(parse_algorithm(a), n, so);  // its schedule exists at every n asked for
        } catch (const Error& e) {
          throw Error(ErrorCode::InvalidUsage, "--algo " + a + " at n = " + std::to_string(n) + ": " + e.what());
        }
      }
    }
    require(o.warmup >= 0, "--warmup " + std::to_string(o.warmup) + ": expected >= 0");
    require(o.iters >= 1, "--iters " + std::to_string(o.iters) + ": expected >= 1");
    require(o.min_iters >= 1 && o.min_iters <= o.iters,
            "--min-iters " + std::to_string(o.min_iters) + ": expected 1..--iters (" + std::to_string(o.iters) + ")");
    require(o.point_s >= 0 && std::isfinite(o.point_s), "--point-seconds: expected a finite time >= 0");
    require(o.deadline_s >= 0 && std::isfinite(o.deadline_s), "--deadline: expected a finite time >= 0 (0: none)");
    require(o.call_timeout_s > 0 && std::isfinite(o.call_timeout_s), "--call-timeout: expected a finite time > 0");
  } catch (const Error& e) {
    err << tool << ": " << e.what() << "\n";
    return 2;
  }
  return std::nullopt;
}

bool another_call(const RoundBenchOptions& o, int done, double elapsed_s) {
  if (done >= o.iters) return false;
  if (done < o.min_iters) return true;
  return elapsed_s < o.point_s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

RoundCostRow summarize_point(const std::string& algorithm, int nranks, std::size_t bytes, const PointSamples& s) {
  RoundCostRow r;
  r.algorithm = algorithm;
  r.nranks = nranks;
  r.bytes = bytes;
  r.wrong = s.wrong;
  std::vector<double> host_round, host_call, gpu_round, gpu_call;
  for (std::size_t rank = 0; rank < s.host_call.size(); ++rank) {
    const int rounds = rank < s.rounds.size() ? s.rounds[rank] : 0;
    r.rounds = std::max(r.rounds, rounds);
    r.calls = std::max(r.calls, static_cast<int>(s.host_call[rank].size()));
    for (double t : s.host_call[rank]) {
      host_call.push_back(t);
      if (rounds > 0) host_round.push_back(t / rounds);
    }
    if (rank < s.gpu_call.size())
      for (double t : s.gpu_call[rank]) {
        gpu_call.push_back(t);
        if (rounds > 0) gpu_round.push_back(t / rounds);
      }
  }
  r.host_s = median(host_round);
  if (!host_round.empty()) {
    r.host_min_s = *std::min_element(host_round.begin(), host_round.end());
    r.host_max_s = *std::max_element(host_round.begin(), host_round.end());
  }
  r.host_call_s = median(host_call);
  r.gpu_s = gpu_round.empty() ? -1 : median(gpu_round);
  r.gpu_call_s = gpu_call.empty() ? -1 : median(gpu_call);
  return r;
}

}  // namespace stragglar::bench
