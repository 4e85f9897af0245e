// stragglar::Options — what every front-end's allreduce takes besides the buffers (MPI:
// stragglar/allreduce.hpp, NCCL: stragglar/nccl.hpp, PyTorch: the backend's options).
// The C form is stragglar_options (stragglar.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "stragglar/algorithm.hpp"
#include "stragglar/cost_model.hpp"
#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar {

struct Options {
  // A row of the algorithm table: a schedule (stragglar, ring, rhd, allpairs, broadcast),
  // native (the engine's own AllReduce) or automatic ("auto", the default: the library finds
  // the late rank and picks StragglAR told that rank, Ring, RHD or native; docs/auto.md).
  Algorithm algorithm = Algorithm::automatic;
  // The rank expected last; -1 = n-1. StragglAR and broadcast run with it; auto takes it as a
  // hint (its StragglAR candidate's straggler until the late rank is measured).
  int straggler = -1;
  // Several ranks late together (a slow node): stragglar-k's late set (distinct
  // ranks, at most n/2, any order; empty: {straggler}). A set of one is the straggler for every
  // algorithm; stragglar and broadcast refuse a larger one; ring, rhd, allpairs, native and auto
  // ignore it (auto learns the late set itself: docs/auto.md "Several late ranks").
  // hierarchical takes one host's ranks.
  std::vector<int> stragglers;
  int pipeline = kPipelineAuto;  // StragglAR chunks per rank K in [1, kMaxPipeline]; 0 = the cost model
  // Cost model for pipeline == kPipelineAuto and for auto; nullopt = STRAGGLAR_ALPHA_US /
  // STRAGGLAR_BANDWIDTH_GBPS / STRAGGLAR_REDUCE_BANDWIDTH_GBPS when set, else CostModel{}.
  std::optional<CostModel> cost;
};

// What algorithm = auto decided and saw on a communicator (the most recently used auto
// configuration): MPI stragglar::straggler_report, NCCL nccl_straggler_report, C
// stragglar_*_straggler_report, PyTorch stragglar.torch.straggler_report. docs/auto.md.
struct StragglerReport {
  bool active = false;                         // an auto call has run on this communicator (of 2+ ranks: one rank has no straggler)
  Algorithm algorithm = Algorithm::automatic;  // the decided choice (exploration calls aside)
  int straggler = -1;                          // the rank it treats as late, -1: none
  int late_rank = -1;                          // the rank late in most calls of the last window, -1: none
  std::vector<int> late_set;                   // the set of 2+ ranks late together auto learned (told to
                                               // stragglar-k / hierarchical), ascending; empty: none
  double delay_s = 0;                          // that rank's median delay in that window
  std::vector<double> scores;                  // per rank, in [0, 1]: how late it came (1: latest)
  std::int64_t calls = 0;                      // auto calls so far
  std::int64_t decisions = 0;                  // exchanges of measurements so far
  int ranks_per_host = 0;                      // the communicator's hosts (2+ host-major hosts of
                                               // this many ranks; hierarchical's), 0: one host or none such
  bool exposed_time_exact = false;             // auto measures each call's exposed time on one clock
                                               // (every rank on one machine, a host engine), not
                                               // estimated from in-call times (docs/auto.md)
  std::int64_t arrival_calls = 0;              // calls that took an arrival ticket (STRAGGLAR_ARRIVAL_TICKETS,
                                               // docs/arrival-tickets.md) ...
  std::int64_t arrival_late_calls = 0;         // ... and of them, run without their late ranks (StragglAR
                                               // told this call's late rank, stragglar-k its pair)
};

// Options{} with the STRAGGLAR_ALGORITHM, STRAGGLAR_STRAGGLER and STRAGGLAR_PIPELINE
// environment applied (what stragglar_options_init and the PyTorch backend start from). Throws
// Error(InvalidUsage) naming a malformed variable.
Options options_from_env();

// Options{parse_algorithm(name)}: any name or alias of the table ("stragglar", "ring", "rhd",
// "allpairs", "broadcast"/"direct", "native", "auto"). Throws Error(InvalidUsage) naming it.
Options options_for(std::string_view algorithm_name);

// The pipelining factor K a call with these options runs on `nranks` ranks and `bytes`
// (1 for every algorithm that is not pipelined). Throws Error(InvalidUsage) for a bad pipeline.
int resolve_pipeline(const Options& opts, int nranks, std::size_t bytes);

// The verified schedule a call with these options runs (straggler and K resolved), from the
// process-wide cache. Throws Error(InvalidUsage) for native and auto (no schedule).
std::shared_ptr<const Schedule> schedule_for(const Options& opts, int nranks, std::size_t bytes);

// Every communicator created after this call writes a trace of its calls under `path`, as
// STRAGGLAR_TRACE=path does (it overrides the variable); "" traces none. docs/trace.md.
void set_trace_path(std::string_view path);

}  // namespace stragglar
