// STRAGGLAR_* environment variables, read once (see env.hpp for the list).
#include "runtime/env.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

#include "stragglar/config.hpp"

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {
namespace {

const char* get(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

double positive_number(const char* name, const char* text) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v > 0) || v > 1e12)
    throw Error(ErrorCode::InvalidUsage, std::string(name) + "='" + text +
                                             "' is not valid: expected a positive number");
  return v;
}

bool zero_or_one(const char* name, const char* text) {
  const std::string s = text;
  if (s != "0" && s != "1")
    throw Error(ErrorCode::InvalidUsage, std::string(name) + "='" + s + "' is not valid: expected 0 or 1");
  return s == "1";
}

std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

Env read_env() {
  Env e;
  if (const char* v = get("STRAGGLAR_TIMEOUT_S")) e.timeout_s = positive_number("STRAGGLAR_TIMEOUT_S", v);
  if (const char* v = get("STRAGGLAR_DEBUG")) {
    const std::string s = v;
    if (s == "INFO" || s == "info")
      e.debug_info = true;
    else if (s == "TRACE" || s == "trace")
      e.debug_info = e.debug_trace = true;
    else if (s != "WARN" && s != "warn" && s != "NONE" && s != "none")
      throw Error(ErrorCode::InvalidUsage,
                  "STRAGGLAR_DEBUG='" + s + "' is not valid: expected TRACE, INFO, WARN or NONE");
  }
  if (const char* v = get("STRAGGLAR_VERIFY")) e.verify = zero_or_one("STRAGGLAR_VERIFY", v);
  if (const char* v = get("STRAGGLAR_KEEP_BUFFERS")) e.keep_buffers = zero_or_one("STRAGGLAR_KEEP_BUFFERS", v);
  if (const char* v = get("STRAGGLAR_MAX_MESSAGE_BYTES")) {
    const double b = positive_number("STRAGGLAR_MAX_MESSAGE_BYTES", v);
    if (b < 1 || b > 2147483647.0 || b != static_cast<double>(static_cast<long long>(b)))
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_MAX_MESSAGE_BYTES='") + v +
                                               "' is not valid: expected an integer in [1, 2147483647]");
    e.max_message_bytes = static_cast<std::size_t>(b);
  }
  if (const char* v = get("STRAGGLAR_ALGORITHM")) {
    try {
      e.algorithm = parse_algorithm(v);
    } catch (const Error& err) {
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_ALGORITHM: ") + err.what());
    }
  }
  if (const char* v = get("STRAGGLAR_STRAGGLER")) {
    char* end = nullptr;
    errno = 0;
    const long r = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || r < -1 || r >= kMaxRanks)
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_STRAGGLER='") + v +
                                               "' is not valid: expected a rank, or -1 for the last rank");
    e.straggler = static_cast<int>(r);
  }
  if (const char* v = get("STRAGGLAR_PIPELINE")) {
    try {
      e.pipeline = parse_pipeline(v);
    } catch (const Error& err) {
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_PIPELINE: ") + err.what());
    }
    if (*e.pipeline > kMaxPipeline)
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_PIPELINE='") + v + "' is not valid: expected auto or a K in [1, " +
                                               std::to_string(kMaxPipeline) + "]");
  }
  if (const char* v = get("STRAGGLAR_AUTO_PERIOD")) {
    const double p = positive_number("STRAGGLAR_AUTO_PERIOD", v);
    if (p < 1 || p > 1000 || p != static_cast<double>(static_cast<int>(p)))
      throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_AUTO_PERIOD='") + v +
                                               "' is not valid: expected an integer in [1, 1000]");
    e.auto_period = static_cast<int>(p);
  }
  if (const char* v = get("STRAGGLAR_TRACE")) e.trace_path = v;
  if (const char* v = get("STRAGGLAR_ALPHA_US")) {
    e.cost.alpha_s = positive_number("STRAGGLAR_ALPHA_US", v) * 1e-6;
    e.cost_from_env = true;
  }
  if (const char* v = get("STRAGGLAR_BANDWIDTH_GBPS")) {
    e.cost.beta_s_per_byte = 1.0 / (positive_number("STRAGGLAR_BANDWIDTH_GBPS", v) * 1e9);
    e.cost_from_env = true;
  }
  if (const char* v = get("STRAGGLAR_REDUCE_BANDWIDTH_GBPS")) {
    e.cost.gamma_s_per_byte = 1.0 / (positive_number("STRAGGLAR_REDUCE_BANDWIDTH_GBPS", v) * 1e9);
    e.cost_from_env = true;
  }
  return e;
}

}  // namespace

std::string Env::to_string() const {
  return "STRAGGLAR_TIMEOUT_S=" + fmt(timeout_s) +
         " STRAGGLAR_DEBUG=" + (debug_trace ? "TRACE" : debug_info ? "INFO" : "WARN") +
         " STRAGGLAR_VERIFY=" + (verify ? "1" : "0") +
         " STRAGGLAR_KEEP_BUFFERS=" + (keep_buffers ? "1" : "0") +
         " STRAGGLAR_MAX_MESSAGE_BYTES=" + std::to_string(max_message_bytes) +
         " STRAGGLAR_AUTO_PERIOD=" + std::to_string(auto_period) +
         (algorithm ? std::string(" STRAGGLAR_ALGORITHM=") + stragglar::to_string(*algorithm) : std::string()) +
         (straggler ? " STRAGGLAR_STRAGGLER=" + std::to_string(*straggler) : std::string()) +
         (pipeline ? " STRAGGLAR_PIPELINE=" + (*pipeline == kPipelineAuto ? std::string("auto") : std::to_string(*pipeline))
                   : std::string()) +
         (trace_path.empty() ? std::string() : " STRAGGLAR_TRACE=" + trace_path) +
         " STRAGGLAR_ALPHA_US=" + fmt(cost.alpha_s * 1e6) +
         " STRAGGLAR_BANDWIDTH_GBPS=" + fmt(1.0 / cost.beta_s_per_byte / 1e9) +
         " STRAGGLAR_REDUCE_BANDWIDTH_GBPS=" +
         (cost.gamma_s_per_byte > 0 ? fmt(1.0 / cost.gamma_s_per_byte / 1e9) : std::string("unset")) +
         (cost_from_env ? "" : " (cost model: defaults)");
}

const Env& env() {
  static const Env e = [] {
    Env read = read_env();
    // Once per process (NCCL_DEBUG=INFO style), whichever communicator reads it first.
    if (read.debug_info)
      std::fprintf(stderr, "stragglar INFO [pid %ld]: version %s, config: %s\n", static_cast<long>(getpid()),
                   STRAGGLAR_VERSION, read.to_string().c_str());
    return read;
  }();
  return e;
}

double cleanup_timeout_s() noexcept {
  try {
    return env().timeout_s;
  } catch (...) {
    return Env{}.timeout_s;
  }
}

}  // namespace stragglar::detail
