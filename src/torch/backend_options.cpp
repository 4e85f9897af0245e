// stragglar.torch.Options: arguments, else STRAGGLAR_* environment, else the core's defaults.
#include "backend_options.hpp"

#include <cerrno>
#include <cstdlib>
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::torch_backend {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

int parse_straggler(const std::string& text, const char* what) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == nullptr || *end != '\0' || errno != 0 || v < -1 || v > kMaxRanks - 1)
    throw Error(ErrorCode::InvalidUsage, std::string(what) + " '" + text + "' is not valid: expected a rank in [0, " +
                                             std::to_string(kMaxRanks) + ") or -1 for the last rank");
  return static_cast<int>(v);
}

// Re-throws an error of the core's parsers with the name of where the value came from.
template <typename F>
auto named(const char* what, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(e.code(), std::string(what) + ": " + e.what());
  }
}

}  // namespace

BackendOptions BackendOptions::make(const std::string& algorithm, const int* straggler, const std::string& pipeline) {
  BackendOptions o;
  if (!algorithm.empty()) {
    o.core.algorithm = named("Options(algorithm=...)", [&] { return parse_algorithm(algorithm); });
  } else if (const std::string v = env_or_empty("STRAGGLAR_ALGORITHM"); !v.empty()) {
    o.core.algorithm = named("STRAGGLAR_ALGORITHM", [&] { return parse_algorithm(v); });
  }
  if (straggler != nullptr) {
    if (*straggler < -1)
      throw Error(ErrorCode::InvalidUsage, "Options(straggler=" + std::to_string(*straggler) +
                                               ") is not valid: expected a rank >= 0, or -1 for the last rank");
    o.core.straggler = *straggler;
  } else if (const std::string v = env_or_empty("STRAGGLAR_STRAGGLER"); !v.empty()) {
    o.core.straggler = parse_straggler(v, "STRAGGLAR_STRAGGLER");
  }
  if (!pipeline.empty()) {
    o.core.pipeline = named("Options(pipeline=...)", [&] { return parse_pipeline(pipeline); });
  } else if (const std::string v = env_or_empty("STRAGGLAR_PIPELINE"); !v.empty()) {
    o.core.pipeline = named("STRAGGLAR_PIPELINE", [&] { return parse_pipeline(v); });
  }
  if (o.core.pipeline > kMaxPipeline)
    throw Error(ErrorCode::InvalidUsage, "pipeline " + std::to_string(o.core.pipeline) + " is outside [1, " +
                                             std::to_string(kMaxPipeline) + "] (or 'auto')");
  return o;
}

std::string BackendOptions::algorithm_name() const { return stragglar::to_string(core.algorithm); }

std::string BackendOptions::pipeline_text() const {
  return core.pipeline == kPipelineAuto ? "auto" : std::to_string(core.pipeline);
}

std::string BackendOptions::to_string() const {
  return "Options(algorithm='" + algorithm_name() + "', straggler=" + std::to_string(core.straggler) +
         ", pipeline='" + pipeline_text() + "')";
}

}  // namespace stragglar::torch_backend
