// The STRAGGLAR_* table and its reader (env.hpp).
#include "runtime/env.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/log.hpp"
#include "stragglar/config.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/units.hpp"

namespace stragglar::detail {
namespace {

// ---- value parsers: false (or stragglar::Error) when the text is not a value -----------------
bool number(std::string_view text, double lo, double hi, double& out) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !(v >= lo) || !(v <= hi)) return false;
  out = v;
  return true;
}

bool positive(std::string_view text, double& out) { return number(text, 0, 1e12, out) && out > 0; }

bool integer(std::string_view text, long long lo, long long hi, long long& out) {
  double v = 0;
  if (!number(text, static_cast<double>(lo), static_cast<double>(hi), v) || v != static_cast<double>(static_cast<long long>(v)))
    return false;
  out = static_cast<long long>(v);
  return true;
}

// Digits only (a rank: "3", not "3.0").
bool plain_integer(std::string_view text, long long lo, long long hi, long long& out) {
  const std::string s(text);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool zero_or_one(std::string_view text, bool& out) {
  if (text != "0" && text != "1") return false;
  out = text == "1";
  return true;
}

bool size_in_bytes(std::string_view text, std::size_t& out) {
  out = text == "0" ? 0 : parse_bytes(text);  // parse_bytes throws Error: not a size
  return true;
}

std::string lower(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

const char* ucx_wait_name(UcxWaitMode w) {
  return w == UcxWaitMode::poll_fd ? "poll" : w == UcxWaitMode::backoff ? "backoff" : "yield_poll";
}
const char* ucx_error_mode_name(UcxErrorMode m) {
  return m == UcxErrorMode::per_host ? "per_host" : m == UcxErrorMode::peer ? "peer" : "none";
}

// ---- the table -------------------------------------------------------------------------------
std::vector<ConfigVariable> make_table() {
  using C = RuntimeConfig;
  const std::string max_pipeline = std::to_string(kMaxPipeline);
  return {
      {"STRAGGLAR_TIMEOUT_S", "core", "a positive number of seconds", "60",
       "How long a rank waits for a peer before the call fails with Error(Timeout).",
       [](std::string_view v, C& c) { return positive(v, c.timeout_s); },
       [](const C& c) { return fmt(c.timeout_s); }},
      {"STRAGGLAR_DEBUG", "core", "TRACE, INFO, WARN or NONE", "WARN",
       "INFO: print this configuration once per process, and each new configuration and straggler switch on a "
       "communicator's rank 0 (stderr); TRACE: INFO and every decision of auto.",
       [](std::string_view v, C& c) {
         if (v == "INFO" || v == "info") c.debug_info = true, c.debug_trace = false;
         else if (v == "TRACE" || v == "trace") c.debug_info = c.debug_trace = true;
         else if (v == "WARN" || v == "warn" || v == "NONE" || v == "none") c.debug_info = c.debug_trace = false;
         else return false;
         return true;
       },
       [](const C& c) { return std::string(c.debug_trace ? "TRACE" : c.debug_info ? "INFO" : "WARN"); }},
      {"STRAGGLAR_ALGORITHM", "core", "one of " + algorithm_names(), "auto",
       "The algorithm of every call whose options do not name one (stragglar_options_init, the PyTorch "
       "backend's Options, options_from_env()).",
       [](std::string_view v, C& c) { return c.algorithm = parse_algorithm(v), true; },
       [](const C& c) { return c.algorithm ? std::string(to_string(*c.algorithm)) : std::string(); }},
      {"STRAGGLAR_STRAGGLER", "core", "a rank, or -1 for the last rank", "-1",
       "The rank expected last, for the options' default (auto takes it as a hint).",
       [](std::string_view v, C& c) {
         long long r = 0;
         if (!plain_integer(v, -1, kMaxRanks - 1, r)) return false;
         c.straggler = static_cast<int>(r);
         return true;
       },
       [](const C& c) { return c.straggler ? std::to_string(*c.straggler) : std::string(); }},
      {"STRAGGLAR_PIPELINE", "core", "auto or an integer K in [1, " + max_pipeline + "]", "auto",
       "StragglAR's chunks per rank K for the options' default; auto: chosen by the cost model.",
       [](std::string_view v, C& c) { return c.pipeline = parse_pipeline(v), true; },
       [](const C& c) {
         return !c.pipeline ? std::string() : *c.pipeline == kPipelineAuto ? std::string("auto") : std::to_string(*c.pipeline);
       }},
      {"STRAGGLAR_AUTO_PERIOD", "core", "an integer in [1, 1000]", "5",
       "algorithm = auto: calls between two exchanges of measurements (decisions).",
       [](std::string_view v, C& c) {
         long long p = 0;
         if (!integer(v, 1, 1000, p)) return false;
         c.auto_period = static_cast<int>(p);
         return true;
       },
       [](const C& c) { return std::to_string(c.auto_period); }},
      {"STRAGGLAR_KEEP_BUFFERS", "core", "0 or 1", "1",
       "1: a call that fails leaves the caller's buffer as it was (host engines keep a copy for the call); 0: no "
       "copy, the buffer is undefined after an error, as in NCCL, Gloo and MPI.",
       [](std::string_view v, C& c) { return zero_or_one(v, c.keep_buffers); },
       [](const C& c) { return std::string(c.keep_buffers ? "1" : "0"); }},
      {"STRAGGLAR_VERIFY", "core", "0 or 1", "1",
       "0: skip the exact verification of schedules entering the plan cache.",
       [](std::string_view v, C& c) { return zero_or_one(v, c.verify); },
       [](const C& c) { return std::string(c.verify ? "1" : "0"); }},
      {"STRAGGLAR_ARRIVAL_TICKETS", "core", "off, auto or on", "auto",
       "algorithm = auto: find each call's late ranks by the order the ranks arrive in, where every rank shares one "
       "host's memory (docs/arrival-tickets.md). auto: where the ranks can; on: an error where they cannot. Any case.",
       [](std::string_view v, C& c) {
         const std::string m = lower(v);
         if (m == "off") c.arrival_tickets = ArrivalTicketsMode::off;
         else if (m == "auto") c.arrival_tickets = ArrivalTicketsMode::automatic;
         else if (m == "on") c.arrival_tickets = ArrivalTicketsMode::on;
         else return false;
         return true;
       },
       [](const C& c) {
         return std::string(c.arrival_tickets == ArrivalTicketsMode::on          ? "on"
                            : c.arrival_tickets == ArrivalTicketsMode::automatic ? "auto"
                                                                                 : "off");
       }},
      {"STRAGGLAR_TRACE", "core", "a file name prefix or a directory", "(off)",
       "A trace of every call: each rank writes PREFIX.c<C>.r<R>.jsonl and .json (Chrome trace); "
       "python -m stragglar.report reads them (docs/trace.md).",
       [](std::string_view v, C& c) { return c.trace_path = std::string(v), true; },
       [](const C& c) { return c.trace_path; }},
      {"STRAGGLAR_MAX_MESSAGE_BYTES", "core", "an integer in [1, 2147483647]", "1073741824",
       "The largest single MPI message; bigger ones are split (below MPI's INT_MAX count limit).",
       [](std::string_view v, C& c) {
         long long b = 0;
         if (!integer(v, 1, 2147483647LL, b)) return false;
         c.max_message_bytes = static_cast<std::size_t>(b);
         return true;
       },
       [](const C& c) { return std::to_string(c.max_message_bytes); }},
      {"STRAGGLAR_ALPHA_US", "core", "a positive number of microseconds", "the engine's",
       "alpha (latency per message) of the cost model of pipeline = auto and algorithm = auto. Unset: the GPU "
       "model's 3 us, and for host engines (MPI, UCX, PyTorch CPU) a shared-memory model.",
       [](std::string_view v, C& c) {
         double a = 0;
         if (!positive(v, a)) return false;
         c.cost.alpha_s = a * 1e-6, c.cost_from_env = true;
         return true;
       },
       [](const C& c) { return fmt(c.cost.alpha_s * 1e6); }},
      {"STRAGGLAR_BANDWIDTH_GBPS", "core", "a positive number of GB/s", "the engine's",
       "1/beta of that cost model in GB/s (1e9 bytes/s).",
       [](std::string_view v, C& c) {
         double g = 0;
         if (!positive(v, g)) return false;
         c.cost.beta_s_per_byte = 1.0 / (g * 1e9), c.cost_from_env = true;
         return true;
       },
       [](const C& c) { return fmt(1.0 / c.cost.beta_s_per_byte / 1e9); }},
      {"STRAGGLAR_REDUCE_BANDWIDTH_GBPS", "core", "a positive number of GB/s", "the engine's",
       "1/gamma of that cost model in GB/s: how fast a rank reduces (unset with the other two: not modelled).",
       [](std::string_view v, C& c) {
         double g = 0;
         if (!positive(v, g)) return false;
         c.cost.gamma_s_per_byte = 1.0 / (g * 1e9), c.cost_from_env = true;
         return true;
       },
       [](const C& c) { return c.cost.gamma_s_per_byte > 0 ? fmt(1.0 / c.cost.gamma_s_per_byte / 1e9) : std::string("unset"); }},
      {"STRAGGLAR_UCX_WAIT", "UCX", "poll, backoff or yield_poll", "backoff",
       "How a UCX rank waits for messages: backoff (yield for 1 ms, then sleep 20 us between polls), poll (the "
       "worker's event fd) or yield_poll (yield for 1 ms, then the event fd). Any case.",
       [](std::string_view v, C& c) {
         const std::string w = lower(v);
         if (w == "poll") c.ucx_wait = UcxWaitMode::poll_fd;
         else if (w == "backoff") c.ucx_wait = UcxWaitMode::backoff;
         else if (w == "yield_poll") c.ucx_wait = UcxWaitMode::yield_poll;
         else return false;
         return true;
       },
       [](const C& c) { return std::string(ucx_wait_name(c.ucx_wait)); }},
      {"STRAGGLAR_UCX_ERROR_MODE", "UCX", "per_host, peer or none", "per_host",
       "UCX's error handling: per_host (across hosts; shared memory and a process watch within a host), peer "
       "(everywhere) or none. Any case.",
       [](std::string_view v, C& c) {
         const std::string m = lower(v);
         if (m == "per_host") c.ucx_error_mode = UcxErrorMode::per_host;
         else if (m == "peer") c.ucx_error_mode = UcxErrorMode::peer;
         else if (m == "none") c.ucx_error_mode = UcxErrorMode::none;
         else return false;
         return true;
       },
       [](const C& c) { return std::string(ucx_error_mode_name(c.ucx_error_mode)); }},
      {"STRAGGLAR_PMPI_MIN_BYTES", "PMPI preload", "a size in bytes (0, 4096, 64K, 1M)", "64K",
       "The PMPI preload: smaller MPI_Allreduce calls pass through to MPI (docs/preload.md).",
       [](std::string_view v, C& c) { return size_in_bytes(v, c.pmpi_min_bytes); },
       [](const C& c) { return std::to_string(c.pmpi_min_bytes); }},
      {"STRAGGLAR_NCCL_MIN_BYTES", "NCCL preload", "a size in bytes (0, 4096, 64K, 1M)", "1M",
       "The NCCL preload: smaller ncclAllReduce calls go to NCCL (docs/preload.md).",
       [](std::string_view v, C& c) { return size_in_bytes(v, c.nccl_min_bytes); },
       [](const C& c) { return std::to_string(c.nccl_min_bytes); }},
  };
}

void read_one(const ConfigVariable& var, const EnvLookup& lookup, RuntimeConfig& into) {
  const char* value = lookup(var.name);
  if (value == nullptr || *value == '\0') return;
  bool ok = false;
  try {
    ok = var.parse(value, into);
  } catch (const Error&) {  // a library parser's own message: the one below says the same, in the rule's words
  }
  if (!ok) throw Error(ErrorCode::InvalidUsage, std::string(var.name) + "='" + value + "' is not valid: expected " + var.expected);
}

// `text` in lines of at most `width` characters, each after `indent`.
std::string wrap(std::string_view text, std::size_t width, const std::string& indent) {
  std::string out, line;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(at, end - at);
    if (!line.empty() && line.size() + 1 + word.size() > width) out += indent + line + "\n", line.clear();
    if (!line.empty()) line += ' ';
    line += word;
    at = end + 1;
  }
  if (!line.empty()) out += indent + line + "\n";
  return out;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

}  // namespace

std::span<const ConfigVariable> config_variables() {
  // Never destroyed: a destructor running at exit (MPI_Finalize's callbacks) may still read it.
  static const std::vector<ConfigVariable>& table = *new std::vector<ConfigVariable>(make_table());
  return table;
}

const char* process_environment(const char* name) { return std::getenv(name); }

RuntimeConfig read_runtime_config(const EnvLookup& lookup) {
  RuntimeConfig c;
  for (const ConfigVariable& var : config_variables()) read_one(var, lookup, c);
  return c;
}

RuntimeConfig read_runtime_config_of(std::initializer_list<std::string_view> names, const EnvLookup& lookup) {
  RuntimeConfig c;
  for (std::string_view name : names) {
    const auto table = config_variables();
    const auto it = std::find_if(table.begin(), table.end(), [&](const ConfigVariable& v) { return v.name == name; });
    if (it == table.end()) throw Error(ErrorCode::Internal, "read_runtime_config_of: no variable " + std::string(name));
    read_one(*it, lookup, c);
  }
  return c;
}

std::string RuntimeConfig::to_string() const {
  std::string out;
  for (const ConfigVariable& var : config_variables()) {
    const std::string value = var.show(*this);
    if (value.empty()) continue;
    if (!out.empty()) out += ' ';
    out.append(var.name).append("=").append(value);
  }
  return out + (cost_from_env ? "" : " (cost model: defaults)");
}

const RuntimeConfig& runtime_config() {
  static const RuntimeConfig config = [] {
    RuntimeConfig read = read_runtime_config();
    // Once per process (NCCL_DEBUG=INFO style), whichever front-end reads it first.
    if (read.debug_info) log_info_process("version %s, config: %s", STRAGGLAR_VERSION, read.to_string().c_str());
    return read;
  }();
  return config;
}

double cleanup_timeout_s() noexcept {
  try {
    return runtime_config().timeout_s;
  } catch (...) {
    return RuntimeConfig{}.timeout_s;
  }
}

std::string config_help_text() {
  std::string out = "STRAGGLAR_* environment variables (read once per process; docs/configuration.md):\n";
  for (const ConfigVariable& var : config_variables()) {
    out += "\n  " + pad(var.name, 33) + "default " + var.default_text + "  [" + var.component + "]\n";
    out += wrap("expected: " + var.expected, 92, "      ") + wrap(var.help, 92, "      ");
  }
  return out;
}

std::string config_help_markdown() {
  std::string out = "| Variable | Component | Default | Expected | What it does |\n|---|---|---|---|---|\n";
  for (const ConfigVariable& var : config_variables())
    out += "| `" + std::string(var.name) + "` | " + var.component + " | " + var.default_text + " | " + var.expected +
           " | " + var.help + " |\n";
  return out;
}

}  // namespace stragglar::detail
