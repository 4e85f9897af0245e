// stragglar.torch.Options: arguments, else the STRAGGLAR_* environment (the core's options_from_env), else the
// core's defaults.
#include "backend_options.hpp"

#include <string>

#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::torch_backend {
namespace {

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
  o.core = options_from_env();  // STRAGGLAR_ALGORITHM / _STRAGGLER / _PIPELINE, read once by the core
  if (!algorithm.empty()) o.core.algorithm = named("Options(algorithm=...)", [&] { return parse_algorithm(algorithm); });
  if (straggler != nullptr) {
    if (*straggler < -1)
      throw Error(ErrorCode::InvalidUsage, "Options(straggler=" + std::to_string(*straggler) +
                                               ") is not valid: expected a rank >= 0, or -1 for the last rank");
    o.core.straggler = *straggler;
  } else {
    o.straggler_from_env = o.core.straggler >= 0;
  }
  if (!pipeline.empty()) o.core.pipeline = named("Options(pipeline=...)", [&] { return parse_pipeline(pipeline); });
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
  const std::string pipeline = core.pipeline == kPipelineAuto ? "'auto'" : std::to_string(core.pipeline);
  return "Options(algorithm='" + algorithm_name() + "', straggler=" + std::to_string(core.straggler) +
         ", pipeline=" + pipeline + ")";
}

}  // namespace stragglar::torch_backend
