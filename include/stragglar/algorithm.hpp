// The algorithm table: one row per algorithm (src/synth/algorithm_table.cpp). Every name list,
// range check, C enum mapping and benchmark flag reads from it, so adding an algorithm touches
// its synthesizer file, its row (and its enum value here and in stragglar.h) and its tests.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stragglar/stragglar.h"

namespace stragglar {

enum class Algorithm : int {
  stragglar = stragglar_algo_stragglar,
  ring = stragglar_algo_ring,
  rhd = stragglar_algo_rhd,
  allpairs = stragglar_algo_allpairs,
  broadcast = stragglar_algo_broadcast,
  stragglar_k = stragglar_algo_stragglar_k,  // several late ranks (SynthOptions::stragglers)
  hierarchical = stragglar_algo_hierarchical,  // the late ranks are one host (SynthOptions::stragglers)
  native = stragglar_algo_native,    // the engine's own AllReduce; no schedule
  automatic = stragglar_algo_auto,   // "auto": straggler and algorithm chosen online; no schedule
};

enum class AlgorithmKind {
  schedule,   // synthesized, verified and run by our executor
  native,     // the engine's own AllReduce (MPI_Allreduce, ncclAllReduce, Gloo)
  automatic,  // a policy that picks one of the others per call
};

struct Schedule;
struct SynthOptions;

struct AlgorithmInfo {
  Algorithm id;
  const char* name;                        // canonical: what to_string gives and every list shows
  std::span<const std::string_view> aliases;  // other accepted names ("direct" for broadcast)
  AlgorithmKind kind;
  bool uses_straggler;  // its schedule singles out a straggler (rank n-1, relabelled)
  bool pipelined;       // takes a pipelining factor K > 1
  // kind == schedule: builds the schedule for n ranks with the straggler at `straggler`
  // (arguments already checked by synthesize()). nullptr otherwise.
  Schedule (*synthesize)(int nranks, int straggler, const SynthOptions& opts);
  const char* summary;  // one line, for --help and docs
};

// Every row, in C enum order.
std::span<const AlgorithmInfo> algorithm_table() noexcept;
// The row of `a`, or nullptr when `a` is not a value of the table (e.g. a bad C enum cast).
const AlgorithmInfo* find_algorithm(Algorithm a) noexcept;
// The row of `a`; throws Error(InvalidUsage) naming the value and the accepted ones.
const AlgorithmInfo& algorithm_info(Algorithm a);
// Canonical name ("stragglar", ..., "native", "auto"); "?" for a value not in the table.
const char* to_string(Algorithm a) noexcept;
// Accepts canonical names and aliases; throws Error(InvalidUsage) naming the value and the list.
Algorithm parse_algorithm(std::string_view name);
// "stragglar, ring, rhd, allpairs, broadcast (alias direct), native, auto" — or only the
// algorithms that have schedules. For messages and --help.
std::string algorithm_names(bool schedules_only = false);
// The algorithms that have schedules (kind == schedule), in table order.
const std::vector<Algorithm>& scheduled_algorithms();

}  // namespace stragglar
