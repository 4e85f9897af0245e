// Process-wide caches of verified schedules and compiled plans (internal; the runtime core's
// plan cache). Thread-safe. docs/verification.md says when what is verified.
//
// A straggler switch costs no synthesis and no verification: every algorithm that
// singles out a straggler (stragglar, broadcast) is synthesized with it at n-1 and relabelled
// (rank r -> (r + s + 1) mod n, detail::straggler_relabeling), so one canonical schedule per
// (algorithm, n, K) is synthesized, verified once and kept packed (~8 bytes a transfer); the
// schedule or plan for straggler s is derived from it by renaming ranks, which keeps it valid.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "stragglar/plan.hpp"
#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {

class PackedSchedule;

struct ScheduleKey {
  Algorithm algorithm;
  int nranks;
  int straggler;  // the straggler rank, or -1 for algorithms that single none out (caller normalises)
  int pipeline;   // resolved K >= 1 (1 for every algorithm but stragglar)
  // stragglar-k with several late ranks: the set, ascending, and straggler = -1.
  // Its canonical schedule has them at n-k..n-1 and is relabelled with late_set_relabeling.
  std::vector<int> stragglers = {};
  bool operator==(const ScheduleKey&) const = default;
};

// The verified schedule for key (synthesize → verify_or_throw unless verify is false).
// Throws stragglar::Error. Built from the canonical schedule (a whole Schedule: 48 bytes a
// transfer, 1.6 GB at n = 4096 — the runtime asks for plans); kept while a caller holds it.
std::shared_ptr<const Schedule> cached_schedule(const ScheduleKey& key, bool verify = true);
// This rank's compiled plan for key: equal to compile(*cached_schedule(key), rank), derived
// from the canonical schedule without synthesizing or verifying again. The most recently used
// plans are kept.
std::shared_ptr<const Plan> cached_plan(const ScheduleKey& key, int rank, bool verify = true);

// The canonical schedule of key's (algorithm, n, K): straggler n-1 where the algorithm has one.
// Verified once per process when `verify` (a later call with verify = true verifies one that was
// cached without). Throws stragglar::Error.
std::shared_ptr<const PackedSchedule> cached_canonical(const ScheduleKey& key, bool verify = true);

// compile(relabel(canonical, straggler_relabeling(n, straggler)), rank) without building the
// relabelled schedule: the canonical rank that becomes `rank` is compiled, its peers renamed.
// straggler < 0: no renaming. Throws Error(InvalidUsage) for a rank outside [0, n).
Plan compile_relabeled(const PackedSchedule& canonical, int straggler, int rank);
// The same with any renaming (canonical rank r becomes perm[r]; empty: none).
Plan compile_relabeled(const PackedSchedule& canonical, const std::vector<int>& perm, int rank);

// Drops every cached schedule and plan (tests and benchmarks measure first calls with it).
void clear_plan_cache();

}  // namespace stragglar::detail
