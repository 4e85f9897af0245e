// Configuration from the environment, read once into one object (DESIGN.md "Conventions").
//
//   STRAGGLAR_TIMEOUT_S       seconds a rank waits for a peer before Error(Timeout) (default 60)
//   STRAGGLAR_DEBUG           INFO: print this config once per process, and every new
//                             configuration and straggler switch on a communicator's rank 0 (stderr);
//                             TRACE: INFO and every decision of auto (docs/auto.md)
//   STRAGGLAR_ALPHA_US        α of the cost model used by pipeline = auto (default CostModel{}) and by
//                             algorithm = auto (default: its engine's, auto_cost_model.hpp)
//   STRAGGLAR_BANDWIDTH_GBPS  1/β in GB/s (1e9 bytes/s) of that cost model
//   STRAGGLAR_REDUCE_BANDWIDTH_GBPS  1/γ in GB/s: how fast a rank reduces (default: not modelled)
//   STRAGGLAR_VERIFY          0: skip verify_or_throw on schedules entering the cache (default 1)
//   STRAGGLAR_ALGORITHM, STRAGGLAR_STRAGGLER, STRAGGLAR_PIPELINE
//                             defaults of stragglar_options_init (C), the PyTorch backend's
//                             Options and stragglar::options_from_env() (C++)
//   STRAGGLAR_AUTO_PERIOD     algorithm = auto: calls between exchanges of measurements (default 5)
//   STRAGGLAR_KEEP_BUFFERS    1: a call that raises leaves the caller's buffer as it was (the session
//                             keeps a copy for the call, host engines; default); 0: no copy, the
//                             buffer is undefined after an error, as in NCCL, Gloo and MPI
//   STRAGGLAR_TRACE           a trace of every call: PREFIX.c<C>.r<R>.{jsonl,json} per rank (docs/trace.md)
//   STRAGGLAR_MAX_MESSAGE_BYTES  largest single MPI message; bigger ones are split (default
//                             1 GiB, below MPI's INT_MAX count limit; tests set it small)
#pragma once
#include <cstddef>
#include <optional>
#include <string>

#include "stragglar/algorithm.hpp"

#include "stragglar/cost_model.hpp"

namespace stragglar::detail {

struct Env {
  double timeout_s = 60.0;
  bool debug_info = false;
  bool debug_trace = false;  // STRAGGLAR_DEBUG=TRACE: INFO, and every decision of auto with its estimates
  bool verify = true;
  bool keep_buffers = true;
  CostModel cost;
  bool cost_from_env = false;
  std::size_t max_message_bytes = std::size_t{1} << 30;
  int auto_period = 5;
  std::string trace_path;  // STRAGGLAR_TRACE: where each rank writes its trace; "" = off (call_trace.hpp)
  // Defaults for the options (std::nullopt: not set).
  std::optional<Algorithm> algorithm;
  std::optional<int> straggler;
  std::optional<int> pipeline;  // STRAGGLAR_AUTO_PERIOD: calls between auto's exchanges (decisions)

  std::string to_string() const;  // "STRAGGLAR_TIMEOUT_S=60 STRAGGLAR_DEBUG=INFO ..."
};

// Read on first use (thread-safe); throws Error(InvalidUsage) naming a malformed variable.
const Env& env();
// STRAGGLAR_TIMEOUT_S for cleanup (destructors, MPI_Finalize's callbacks), which must not throw:
// the default when the environment does not read (its error already reached the failed call).
double cleanup_timeout_s() noexcept;

}  // namespace stragglar::detail
