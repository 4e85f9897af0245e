// Process-wide caches of verified schedules and compiled plans (plan_cache.hpp).
#include "plan/plan_cache.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include "stragglar/verify.hpp"

namespace stragglar::detail {
namespace {

using Key = std::tuple<int, int, int, int>;
Key key_of(const ScheduleKey& k) { return {static_cast<int>(k.algorithm), k.nranks, k.straggler, k.pipeline}; }

std::mutex g_mutex;
std::map<Key, std::shared_ptr<const Schedule>> g_schedules;
std::map<std::pair<Key, int>, std::shared_ptr<const Plan>> g_plans;

}  // namespace

std::shared_ptr<const Schedule> cached_schedule(const ScheduleKey& key, bool verify) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = g_schedules.find(key_of(key)); it != g_schedules.end()) return it->second;
  }
  SynthOptions so;
  if (key.straggler >= 0) so.straggler = key.straggler;
  so.pipeline = key.pipeline;
  auto s = std::make_shared<const Schedule>(synthesize(key.algorithm, key.nranks, so));
  if (verify) verify_or_throw(*s);
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_schedules.emplace(key_of(key), std::move(s)).first->second;
}

std::shared_ptr<const Plan> cached_plan(const ScheduleKey& key, int rank, bool verify) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (auto it = g_plans.find({key_of(key), rank}); it != g_plans.end()) return it->second;
  }
  auto plan = std::make_shared<const Plan>(compile(*cached_schedule(key, verify), rank));
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_plans.emplace(std::make_pair(key_of(key), rank), std::move(plan)).first->second;
}

}  // namespace stragglar::detail
