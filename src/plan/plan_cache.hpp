// Process-wide caches of verified schedules and compiled plans (internal; the runtime core's
// plan cache). Thread-safe.
#pragma once
#include <memory>

#include "stragglar/plan.hpp"
#include "stragglar/schedule.hpp"
#include "stragglar/synthesize.hpp"

namespace stragglar::detail {

struct ScheduleKey {
  Algorithm algorithm;
  int nranks;
  int straggler;  // the straggler rank, or -1 for algorithms that single none out (caller normalises)
  int pipeline;   // resolved K >= 1 (1 for every algorithm but stragglar)
  bool operator==(const ScheduleKey&) const = default;
};

// The verified schedule for key (synthesize → verify_or_throw unless verify is false).
// Throws stragglar::Error.
std::shared_ptr<const Schedule> cached_schedule(const ScheduleKey& key, bool verify = true);
// This rank's compiled plan for key.
std::shared_ptr<const Plan> cached_plan(const ScheduleKey& key, int rank, bool verify = true);

}  // namespace stragglar::detail
