// The runtime's configuration from the environment: every STRAGGLAR_* variable the library reads
// (the core, the UCX transport, the PMPI and NCCL preloads), in one table — name, what it
// accepts, its default, its help, how it is parsed into which field of RuntimeConfig. The same
// table prints `stragglar --help-env` and docs/configuration.md, so the list cannot drift.
//
// One rule for a malformed value, everywhere: Error(InvalidUsage) "NAME='value' is not valid:
// expected ...", raised by every call that reads the configuration (never a silent default), as
// MPI and NCCL report a bad argument. An empty value is the same as an unset one.
#pragma once
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "stragglar/algorithm.hpp"
#include "stragglar/cost_model.hpp"

namespace stragglar::detail {

// How a UCX rank waits for its messages (UcxOptions::Wait has the same names).
enum class UcxWaitMode { poll_fd, backoff, yield_poll };
// Whether auto finds each call's late ranks by arrival tickets (arrival_tickets.hpp): off; auto
// (where every rank shares one host's memory and clock); on (and an error where they cannot).
enum class ArrivalTicketsMode { off, automatic, on };
// Which UCX endpoints get UCX's error handling (UcxOptions::ErrorMode).
enum class UcxErrorMode { per_host, peer, none };

struct RuntimeConfig {
  // ---- the core --------------------------------------------------------------------------------
  double timeout_s = 60.0;
  bool debug_info = false;   // STRAGGLAR_DEBUG=INFO (or TRACE)
  bool debug_trace = false;  // STRAGGLAR_DEBUG=TRACE: INFO, and every decision of auto with its estimates
  bool verify = true;
  bool keep_buffers = true;
  CostModel cost;
  bool cost_from_env = false;  // any of the three cost-model variables was set
  std::size_t max_message_bytes = std::size_t{1} << 30;
  int auto_period = 5;
  ArrivalTicketsMode arrival_tickets = ArrivalTicketsMode::automatic;  // STRAGGLAR_ARRIVAL_TICKETS
  std::string trace_path;  // STRAGGLAR_TRACE: where each rank writes its trace; "" = off (call_trace.hpp)
  // Defaults for the options (std::nullopt: not set).
  std::optional<Algorithm> algorithm;
  std::optional<int> straggler;
  std::optional<int> pipeline;
  // ---- the UCX transport -----------------------------------------------------------------------
  UcxWaitMode ucx_wait = UcxWaitMode::backoff;
  UcxErrorMode ucx_error_mode = UcxErrorMode::per_host;
  // ---- the preloads ----------------------------------------------------------------------------
  std::size_t pmpi_min_bytes = std::size_t{64} << 10;
  std::size_t nccl_min_bytes = std::size_t{1} << 20;

  // "STRAGGLAR_TIMEOUT_S=60 STRAGGLAR_DEBUG=INFO ...": every variable as this configuration has it.
  std::string to_string() const;
};

// One row of the table.
struct ConfigVariable {
  const char* name;
  const char* component;  // "core", "UCX", "PMPI preload", "NCCL preload"
  std::string expected;   // what a value must be, as the error says it
  std::string default_text;
  const char* help;
  // Parses a non-empty value into its field; false (or stragglar::Error) when it is not valid.
  bool (*parse)(std::string_view value, RuntimeConfig& into);
  // The field as a value of this variable would set it ("" when unset and without a default).
  std::string (*show)(const RuntimeConfig& config);
};
std::span<const ConfigVariable> config_variables();

// Where a variable's value comes from: the process environment (std::getenv, the library's only
// reader of STRAGGLAR_*), or a test's map. nullptr or "": unset.
using EnvLookup = std::function<const char*(const char* name)>;
const char* process_environment(const char* name);

// Every variable of the table from `lookup`; throws Error(InvalidUsage) naming the first
// malformed one, its value and what was expected.
RuntimeConfig read_runtime_config(const EnvLookup& lookup = process_environment);
// Only `names` (the others keep their defaults): for a component that reads its own variables
// at each use (the UCX transport, at each connect). Throws as read_runtime_config.
RuntimeConfig read_runtime_config_of(std::initializer_list<std::string_view> names,
                                     const EnvLookup& lookup = process_environment);

// The process's configuration, read on first use (thread-safe). STRAGGLAR_DEBUG=INFO prints it
// once per process. Throws Error(InvalidUsage) naming a malformed variable, at every call.
const RuntimeConfig& runtime_config();
inline const RuntimeConfig& env() { return runtime_config(); }
// STRAGGLAR_TIMEOUT_S for cleanup (destructors, MPI_Finalize's callbacks), which must not throw:
// the default when the environment does not read (its error already reached the failed call).
double cleanup_timeout_s() noexcept;

// The table as text: `stragglar --help-env` (aligned columns) and the Markdown table of
// docs/configuration.md (one row per variable).
std::string config_help_text();
std::string config_help_markdown();

}  // namespace stragglar::detail
