// `stragglar` — synthesize, verify and simulate schedules (README "The stragglar tool").
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/env.hpp"
#include "stragglar/error.hpp"
#include "stragglar/round_costs.hpp"
#include "stragglar/schedule_json.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"
#include "stragglar/verify.hpp"

namespace {

using namespace stragglar;

// --stragglers: "K" = the last K ranks; "3,7" (a comma in it) = exactly those ranks.
std::vector<int> parse_stragglers(const std::string& text, int nranks) {
  std::vector<int> late;
  auto number = [&](const std::string& item) {
    std::size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || item.empty())
      throw Error(ErrorCode::InvalidUsage, "--stragglers '" + text + "': '" + item +
                                               "' is not an integer, expected K (the last K ranks) or a list like 3,7");
    return v;
  };
  if (text.find(',') == std::string::npos) {
    const int k = number(text);
    require(k >= 1 && k < nranks, "--stragglers " + text + ": expected K in [1, " + std::to_string(nranks - 1) + "]");
    for (int r = nranks - k; r < nranks; ++r) late.push_back(r);
    return late;
  }
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');)
    if (!item.empty()) late.push_back(number(item));
  return late;  // synthesize() checks range and duplicates, naming the rank
}

struct SynthArgs {
  std::string algo = "stragglar";
  int nranks = 0;
  std::optional<int> straggler;
  std::string stragglers;
  std::string pipeline = "1";
  std::string bytes = "1G", alpha = "3us", bandwidth = "450GiB/s";
  std::string output;
  bool pretty = false;
};

// reduce_bandwidth "" = γ not modelled (the paper's α-β model).
CostModel cost_from(const std::string& alpha, const std::string& bandwidth, const std::string& reduce_bandwidth = "") {
  CostModel c;
  c.alpha_s = parse_duration_s(alpha);
  c.beta_s_per_byte = 1.0 / parse_bandwidth_Bps(bandwidth);
  if (!reduce_bandwidth.empty()) c.gamma_s_per_byte = 1.0 / parse_bandwidth_Bps(reduce_bandwidth);
  return c;
}

int run_synth(const SynthArgs& a) {
  SynthOptions o;
  o.straggler = a.straggler;
  if (!a.stragglers.empty()) o.stragglers = parse_stragglers(a.stragglers, a.nranks);
  o.pipeline = parse_pipeline(a.pipeline);
  o.bytes = parse_bytes(a.bytes);
  o.cost = cost_from(a.alpha, a.bandwidth);
  // Streamed: no JSON document (nor, for StragglAR, a whole Schedule) in memory.
  const Algorithm algo = parse_algorithm(a.algo);
  if (a.straggler && !algorithm_info(algo).uses_straggler)
    std::cerr << "stragglar: note: " << a.algo << " singles out no straggler; --straggler " << *a.straggler
              << " is ignored\n";
  if (a.output.empty() || a.output == "-") {
    synthesize_json(std::cout, algo, a.nranks, o, a.pretty ? 1 : -1);
    std::cout << "\n";
  } else {
    std::ofstream out(a.output, std::ios::binary);
    if (!out) throw Error(ErrorCode::InvalidUsage, "cannot write '" + a.output + "'");
    synthesize_json(out, algo, a.nranks, o, a.pretty ? 1 : -1);
    if (!(out << "\n") || !out.flush()) throw Error(ErrorCode::InvalidUsage, "cannot write '" + a.output + "'");
  }
  return 0;
}

int run_verify(const std::string& path) {
  std::string line;
  VerifyReport r;
  try {
    r = verify_json_file(path, &line);  // streamed: no JSON document in memory
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidSchedule) throw;  // e.g. no such file: a usage error (2)
    std::cerr << "INVALID: " << e.what() << "\n";     // not a schedule at all: invalid (1)
    return 1;
  }
  if (!r.ok) {
    std::cerr << "INVALID: " << r.message << "\n";
    return 1;
  }
  std::cout << "OK: " << line << "\n";
  return 0;
}

struct SimArgs {
  int nranks = 0;
  std::string bytes;
  std::string algo = "all";
  std::optional<int> straggler;
  std::string stragglers;  // several late ranks
  int hosts = 0;           // two link classes: hosts of n/hosts ranks, inter_bandwidth between them
  std::string inter_bandwidth;
  std::string pipeline = "1";
  std::string alpha = "3us", bandwidth = "450GiB/s", delay = "ideal", format = "table";
  std::string reduce_bandwidth;  // empty: reductions cost nothing (γ = 0)
  std::string arrival_tickets;   // the decision's cost: adds a row decided by arrival tickets
  std::string round_overhead;    // host time per round (GPU model), a duration
  std::string round_costs;       // or measured per round: bench_nccl_rounds --json FILE
};

// The host time per round the rows are priced with (round_costs.hpp): none, a constant, or a table.
RoundOverhead overhead_from(const SimArgs& a) {
  if (!a.round_costs.empty()) return RoundOverhead(read_round_costs_file(a.round_costs));
  if (!a.round_overhead.empty()) return RoundOverhead(parse_duration_s(a.round_overhead));
  return RoundOverhead();
}

struct SimRow {
  std::string algorithm;
  int pipeline = 0;  // StragglAR's K, 0 for the others
  SimResult r;
  double round_overhead_s = 0;  // the host time per round it was priced with
};

// StragglAR told the late rank when it comes after the grace, else the better of Ring and RHD
// (simulate_arrival_tickets): what auto with arrival tickets runs, priced.
SimRow arrival_ticket_row(const SimArgs& a, std::size_t bytes, const CostModel& cost, const Delay& delay, int late,
                          const RoundOverhead& h) {
  require(!delay.ideal, "--arrival-tickets needs --delay as a duration (0, 50ms ...), not ideal");
  SynthOptions o;
  o.straggler = late;
  o.bytes = bytes;
  o.cost = cost;
  const Schedule sar = synthesize(Algorithm::stragglar, a.nranks, o);
  const Schedule ring = synthesize(Algorithm::ring, a.nranks), rhd = synthesize(Algorithm::rhd, a.nranks);
  const std::vector<int> last{a.nranks - 1};
  const double ring_s = simulate(ring, bytes, cost, Delay{false, 0}, last, h).exposed_s;
  const double rhd_s = simulate(rhd, bytes, cost, Delay{false, 0}, last, h).exposed_s;
  const Schedule& symmetric = ring_s <= rhd_s ? ring : rhd;
  const double worst = simulate(sar, bytes, cost, Delay{false, 0}, {late}, h).exposed_s;
  const ArrivalTicketCost t{std::max(0.0, worst - std::min(ring_s, rhd_s)), parse_duration_s(a.arrival_tickets)};
  return SimRow{"tickets", 1, simulate_arrival_tickets(sar, symmetric, bytes, cost, delay.seconds, t, h),
                h.host_s(sar.algorithm, a.nranks, bytes)};
}

int run_simulate(const SimArgs& a) {
  CostModel cost = cost_from(a.alpha, a.bandwidth, a.reduce_bandwidth);
  if (a.hosts > 0) {
    require(a.nranks % a.hosts == 0, "--hosts " + std::to_string(a.hosts) + ": expected a divisor of n = " +
                                         std::to_string(a.nranks));
    require(!a.inter_bandwidth.empty(), "--hosts needs --inter-bandwidth (the links between hosts)");
    cost.ranks_per_host = a.nranks / a.hosts;
    cost.inter_beta_s_per_byte = 1.0 / parse_bandwidth_Bps(a.inter_bandwidth);
  } else {
    require(a.inter_bandwidth.empty(), "--inter-bandwidth needs --hosts H");
  }
  // Late ranks: --stragglers (a set), else --straggler, else n-1. Every algorithm
  // runs with all of them late; single-straggler schedules are told the last of them.
  std::vector<int> late;
  if (!a.stragglers.empty()) late = parse_stragglers(a.stragglers, a.nranks);
  else late.push_back(a.straggler.value_or(a.nranks - 1));
  const std::size_t bytes = parse_bytes(a.bytes);
  require(bytes > 0, "bytes = 0, expected a positive buffer size");
  Delay delay;
  if (a.delay == "ideal") delay.ideal = true;
  else delay.seconds = parse_duration_s(a.delay);
  const int pipeline = parse_pipeline(a.pipeline);
  const RoundOverhead overhead = overhead_from(a);
  std::set<std::string> noted;  // algorithms priced outside the measured table, said once

  std::vector<Algorithm> algos;
  if (a.algo == "all") algos = scheduled_algorithms();
  else {
    std::stringstream list(a.algo);
    for (std::string name; std::getline(list, name, ',');) algos.push_back(parse_algorithm(name));
  }
  auto run_one = [&](Algorithm algo) {
    SynthOptions o;
    o.straggler = a.straggler;
    if (algo == Algorithm::stragglar_k || algo == Algorithm::hierarchical) o.stragglers = late;
    else if (late.size() > 1 && algorithm_info(algo).uses_straggler) o.straggler = late.back();
    o.pipeline = pipeline;
    o.bytes = bytes;
    o.cost = cost;
    if (algo == Algorithm::stragglar && pipeline == kPipelineAuto) o.pipeline = choose_pipeline(a.nranks, bytes, cost);
    const Schedule s = synthesize(algo, a.nranks, o);
    if (overhead.beyond_table(s.algorithm, a.nranks, bytes) && noted.insert(s.algorithm).second)
      std::cerr << "stragglar: note: " << s.algorithm << " at n = " << a.nranks << ", " << format_bytes(bytes)
                << " is outside the measured round costs: the nearest measured point's value is used\n";
    int K = 0;  // chunks per punctual rank, for the pipelined rows
    if (algo == Algorithm::stragglar) K = o.pipeline;
    if (algo == Algorithm::stragglar_k || algo == Algorithm::hierarchical)  // both: K·(n − k) chunks
      K = s.nchunks / (a.nranks - static_cast<int>(s.late_ranks().size()));
    return SimRow{to_string(algo), K, simulate(s, bytes, cost, delay, late, overhead),
                  overhead.host_s(s.algorithm, a.nranks, bytes)};
  };
  const SimRow ring = run_one(Algorithm::ring);
  std::vector<SimRow> rows;
  for (Algorithm algo : algos) {
    try {
      rows.push_back(run_one(algo));
    } catch (const Error& e) {
      if (a.algo != "all") throw;
      std::cerr << "stragglar: skipping " << to_string(algo) << ": " << e.what() << "\n";
    }
  }

  if (!a.arrival_tickets.empty()) rows.push_back(arrival_ticket_row(a, bytes, cost, delay, late.back(), overhead));

  const double delay_us = delay.ideal ? -1 : delay.seconds * 1e6;
  const bool priced = !overhead.none();  // the overhead's column and field only when one is given
  if (a.format == "json") {
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    for (const SimRow& row : rows) {
      out.push_back({{"algorithm", row.algorithm}, {"nranks", a.nranks}, {"bytes", bytes},
                     {"pipeline", row.pipeline}, {"rounds", row.r.rounds},
                     {"delay", delay.ideal ? nlohmann::ordered_json("ideal") : nlohmann::ordered_json(delay_us)},
                     {"delay_us", row.r.delay_s * 1e6}, {"time_us", row.r.time_s * 1e6},
                     {"exposed_us", row.r.exposed_s * 1e6}, {"algbw_GBps", static_cast<double>(bytes) / row.r.exposed_s / 1e9},
                     {"speedup_vs_ring", ring.r.exposed_s / row.r.exposed_s}});
      if (priced) out.back()["round_overhead_us"] = row.round_overhead_s * 1e6;
    }
    std::cout << out.dump(1) << "\n";
    return 0;
  }
  const bool csv = a.format == "csv";
  require(csv || a.format == "table", "format '" + a.format + "': expected table, csv or json");
  if (csv) {
    std::cout << "algorithm,nranks,bytes,pipeline,rounds,delay_us,time_us,exposed_us,algbw_GBps,speedup_vs_ring"
              << (priced ? ",round_overhead_us" : "") << "\n";
  } else {
    std::cout << "# n=" << a.nranks << " size=" << format_bytes(bytes) << " alpha=" << cost.alpha_s * 1e6
              << "us bandwidth=" << 1.0 / cost.beta_s_per_byte / 1e9 << "GB/s"
              << (a.reduce_bandwidth.empty() ? "" : " reduce-bandwidth=" + a.reduce_bandwidth) << " delay=" << a.delay << "\n"
              << "# time: from the others' arrival; exposed: from the straggler's arrival; algbw = size/exposed\n";
    if (priced)
      std::cout << "# host enqueue per round (h): " << overhead.describe()
                << "; a rank's k-th round starts no earlier than its arrival + k*h\n";
    std::cout << std::left << std::setw(11) << "algorithm" << std::right << std::setw(5) << "K" << std::setw(8)
              << "rounds" << std::setw(13) << "delay(us)" << std::setw(13) << "time(us)" << std::setw(13)
              << "exposed(us)" << std::setw(12) << "algbw(GB/s)" << std::setw(10) << "vs ring"
              << (priced ? "     h(us)" : "") << "\n";
  }
  for (const SimRow& row : rows) {
    const double algbw = static_cast<double>(bytes) / row.r.exposed_s / 1e9, speedup = ring.r.exposed_s / row.r.exposed_s;
    if (csv) {
      std::cout << row.algorithm << "," << a.nranks << "," << bytes << "," << row.pipeline << "," << row.r.rounds
                << "," << row.r.delay_s * 1e6 << "," << row.r.time_s * 1e6 << "," << row.r.exposed_s * 1e6 << ","
                << algbw << "," << speedup;
      if (priced) std::cout << "," << row.round_overhead_s * 1e6;
      std::cout << "\n";
    } else {
      std::cout << std::fixed << std::setprecision(2) << std::left << std::setw(11) << row.algorithm << std::right
                << std::setw(5) << (row.pipeline ? std::to_string(row.pipeline) : "-") << std::setw(8)
                << row.r.rounds << std::setw(13) << row.r.delay_s * 1e6 << std::setw(13) << row.r.time_s * 1e6
                << std::setw(13) << row.r.exposed_s * 1e6 << std::setw(12) << algbw << std::setw(9)
                << std::setprecision(3) << speedup << "x";
      if (priced) std::cout << std::setw(10) << std::setprecision(2) << row.round_overhead_s * 1e6;
      std::cout << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"stragglar: straggler-aware AllReduce schedules — synthesize, verify, simulate"};
  app.require_subcommand(1);
  // The runtime's STRAGGLAR_* variables, from the table the library reads them with; the Markdown
  // form is docs/configuration.md's table (tests/cli checks that they match).
  app.add_flag_callback("--help-env", [] {
    std::cout << stragglar::detail::config_help_text();
    throw CLI::Success();
  }, "list the STRAGGLAR_* environment variables of the library, with defaults, and exit");
  app.add_flag_callback("--help-env-markdown", [] {
    std::cout << stragglar::detail::config_help_markdown();
    throw CLI::Success();
  }, "the same as a Markdown table (docs/configuration.md)");
  const std::string algos = algorithm_names(true);

  SynthArgs sa;
  CLI::App* synth = app.add_subcommand("synth", "synthesize a schedule and print it as stragglar-schedule/1 JSON");
  synth->add_option("--algo,-a", sa.algo, "algorithm: " + algos)->capture_default_str();
  synth->add_option("--nranks,-n", sa.nranks, "number of ranks")->required();
  synth->add_option("--straggler,-s", sa.straggler, "the straggler's rank (default n-1)");
  synth->add_option("--stragglers", sa.stragglers, "stragglar-k: K (the last K ranks) or a list of late ranks like 3,7");
  synth->add_option("--pipeline,-k", sa.pipeline, "StragglAR: chunks per rank K, or auto")->capture_default_str();
  synth->add_option("--bytes", sa.bytes, "buffer size, for --pipeline auto")->capture_default_str();
  synth->add_option("--alpha", sa.alpha, "latency per message, for --pipeline auto")->capture_default_str();
  synth->add_option("--bandwidth", sa.bandwidth, "bandwidth, for --pipeline auto")->capture_default_str();
  synth->add_option("-o,--output", sa.output, "write the JSON here instead of stdout");
  synth->add_flag("--pretty", sa.pretty, "indent the JSON");

  std::string verify_path;
  CLI::App* verify_cmd = app.add_subcommand("verify", "check a schedule exactly; exit 0 and a summary, 1 and the first violation (or why the input is not a schedule), 2 if it cannot be read");
  verify_cmd->add_option("file", verify_path, "schedule JSON file, or - for stdin")->required();

  SimArgs ma;
  CLI::App* sim = app.add_subcommand("simulate", "predict AllReduce times with the alpha-beta model");
  sim->add_option("--nranks,-n", ma.nranks, "number of ranks")->required();
  sim->add_option("--bytes,-b", ma.bytes, "buffer size (1024, 64M, 1G ...)")->required();
  sim->add_option("--algo,-a", ma.algo, "comma-separated algorithms, or all")->capture_default_str();
  sim->add_option("--straggler,-s", ma.straggler, "the straggler's rank (default n-1)");
  sim->add_option("--stragglers", ma.stragglers,
                  "several late ranks arriving together: K (the last K) or a list like 3,7; every algorithm runs with all of them late");
  sim->add_option("--hosts", ma.hosts, "two link classes: n/H ranks per host (host-major), --inter-bandwidth between hosts");
  sim->add_option("--inter-bandwidth", ma.inter_bandwidth, "bandwidth between hosts, with --hosts");
  sim->add_option("--pipeline,-k", ma.pipeline, "StragglAR: chunks per rank K, or auto")->capture_default_str();
  sim->add_option("--alpha", ma.alpha, "latency per message (ns/us/ms/s)")->capture_default_str();
  sim->add_option("--bandwidth", ma.bandwidth, "link bandwidth (GB/s, GiB/s ...)")->capture_default_str();
  sim->add_option("--reduce-bandwidth", ma.reduce_bandwidth,
                  "bytes/s a rank reduces (adds the gamma term: a reduce receive costs bytes/this more); default: free");
  sim->add_option("--delay", ma.delay, "straggler delay: ideal (hides every no-wait phase), 0 (worst case) or a duration")
      ->capture_default_str();
  sim->add_option("--arrival-tickets", ma.arrival_tickets,
                  "add a row decided by arrival tickets, each decision costing this long (e.g. 1us on a host, 5us on a "
                  "GPU); its grace is StragglAR's worst case minus the best of Ring and RHD (docs/arrival-tickets.md); "
                  "needs a --delay duration");
  CLI::Option* round_overhead = sim->add_option(
      "--round-overhead", ma.round_overhead,
      "GPU model: the host's time to enqueue one round (e.g. 12us); a rank's k-th round starts no earlier than its "
      "arrival + k times this (docs/gpu.md \"The simulator's GPU model\"); default: none");
  sim->add_option("--round-costs", ma.round_costs,
                  "GPU model, measured: the JSON of bench_nccl_rounds --json, interpolated by algorithm, n and size")
      ->excludes(round_overhead);
  sim->add_option("--format", ma.format, "table, csv or json")->capture_default_str()->check(CLI::IsMember({"table", "csv", "json"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*synth) return run_synth(sa);
    if (*verify_cmd) return run_verify(verify_path);
    if (*sim) return run_simulate(ma);
  } catch (const stragglar::Error& e) {
    std::cerr << "stragglar: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "stragglar: internal error: " << e.what() << "\n";
    return 3;
  }
  return 0;
}
