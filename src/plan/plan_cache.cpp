// Process-wide caches of verified schedules and compiled plans (plan_cache.hpp).
#include "plan/plan_cache.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "schedule/packed_schedule.hpp"
#include "schedule/schedule_sink.hpp"
#include "stragglar/error.hpp"
#include "synth/synth_internal.hpp"
#include "verify/verify_packed.hpp"

namespace stragglar::detail {
namespace {

// The key with what does not change the schedule taken out: the straggler of an algorithm
// that has none, K of one that is not pipelined. Messages are built only when a check fails.
ScheduleKey normalized(const ScheduleKey& key) {
  const AlgorithmInfo& info = algorithm_info(key.algorithm);
  if (info.kind != AlgorithmKind::schedule)
    throw Error(ErrorCode::InvalidUsage, std::string("plan cache: algorithm '") + info.name +
                                             "' has no schedule, expected one of " + algorithm_names(true));
  if (key.nranks < kMinRanks || key.nranks > kMaxRanks)
    throw Error(ErrorCode::InvalidUsage, "plan cache: nranks = " + std::to_string(key.nranks) + ", expected " +
                                             std::to_string(kMinRanks) + " <= nranks <= " + std::to_string(kMaxRanks));
  ScheduleKey k = key;
  if (!key.stragglers.empty()) {  // several late ranks: stragglar-k only
    const std::vector<int>& late = key.stragglers;
    if ((key.algorithm != Algorithm::stragglar_k && key.algorithm != Algorithm::hierarchical) || late.size() < 2 || 2 * late.size() > static_cast<std::size_t>(key.nranks))
      throw Error(ErrorCode::InvalidUsage, "plan cache: " + std::to_string(late.size()) + " stragglers for " + info.name +
                                               " on " + std::to_string(key.nranks) +
                                               " ranks, expected stragglar-k or hierarchical with 2 <= k <= n/2");
    for (std::size_t i = 0; i < late.size(); ++i)
      if (late[i] < 0 || late[i] >= key.nranks || (i > 0 && late[i] <= late[i - 1]))
        throw Error(ErrorCode::InvalidUsage, "plan cache: stragglers[" + std::to_string(i) + "] = " +
                                                 std::to_string(late[i]) + ", expected ascending ranks in [0, " +
                                                 std::to_string(key.nranks) + ")");
    k.straggler = -1;
  } else if (info.uses_straggler) {
    if (key.straggler < 0 || key.straggler >= key.nranks)
      throw Error(ErrorCode::InvalidUsage, std::string("plan cache: straggler = ") + std::to_string(key.straggler) +
                                               " for " + info.name + ", expected a rank in [0, " +
                                               std::to_string(key.nranks) + ")");
  } else {
    k.straggler = -1;
  }
  if (info.pipelined) {
    if (key.pipeline < 1 || key.pipeline > kMaxPipeline)
      throw Error(ErrorCode::InvalidUsage, "plan cache: pipeline = " + std::to_string(key.pipeline) +
                                               ", expected a resolved K in [1, " + std::to_string(kMaxPipeline) + "]");
  } else {
    k.pipeline = 1;
  }
  return k;
}

// The canonical schedule, packed as it is synthesized where the synthesizer hands out rounds
// (StragglAR: the one whose n reaches 4096 in practice); the others are synthesized whole.
PackedSchedule synthesize_canonical(const ScheduleKey& k) {
  PackedScheduleBuilder packed;
  if (k.algorithm == Algorithm::stragglar) {
    emit_stragglar(k.nranks, k.pipeline, packed);
  } else {
    SynthOptions o;
    o.pipeline = k.pipeline;  // straggler: n-1, the default
    for (std::size_t j = k.stragglers.size(); j > 0; --j) o.stragglers.push_back(k.nranks - static_cast<int>(j));
    emit(synthesize(k.algorithm, k.nranks, o), packed);
  }
  return packed.take();
}

struct Canonical {
  std::mutex mutex;  // held while synthesizing or verifying: other keys go on meanwhile
  std::shared_ptr<const PackedSchedule> schedule;
  bool verified = false;
};

struct PlanEntry {
  ScheduleKey key;
  int rank;
  std::shared_ptr<const Plan> plan;
  std::uint64_t used;
};
constexpr std::size_t kPlansKept = 64;

using FullKey = std::tuple<int, int, int, int, std::vector<int>>;
FullKey full_key(const ScheduleKey& k) {
  return {static_cast<int>(k.algorithm), k.nranks, k.straggler, k.pipeline, k.stragglers};
}

// The renaming from the canonical schedule to key's: none, the straggler rotation, or the late set's.
std::vector<int> relabeling_of(const ScheduleKey& k) {
  if (!k.stragglers.empty()) return late_set_relabeling(k.nranks, k.stragglers);
  if (k.straggler >= 0 && k.straggler != k.nranks - 1) return straggler_relabeling(k.nranks, k.straggler);
  return {};
}

struct Caches {
  std::mutex mutex;
  std::map<std::tuple<int, int, int, int>, std::shared_ptr<Canonical>> canonical;  // + number of late ranks
  std::vector<PlanEntry> plans;  // the kPlansKept most recently used
  std::uint64_t clock = 0;
  std::map<FullKey, std::weak_ptr<const Schedule>> schedules;
};
Caches& caches() {
  static Caches c;
  return c;
}

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (std::size_t r = 0; r < perm.size(); ++r) inv[static_cast<std::size_t>(perm[r])] = static_cast<int>(r);
  return inv;
}

}  // namespace

std::shared_ptr<const PackedSchedule> cached_canonical(const ScheduleKey& key, bool verify) {
  const ScheduleKey k = normalized(key);
  Caches& c = caches();
  std::shared_ptr<Canonical> entry;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    auto& slot = c.canonical[{static_cast<int>(k.algorithm), k.nranks, k.pipeline, static_cast<int>(k.stragglers.size())}];
    if (!slot) slot = std::make_shared<Canonical>();
    entry = slot;
  }
  std::lock_guard<std::mutex> lock(entry->mutex);
  if (!entry->schedule) {
    ScheduleKey canonical = k;
    canonical.straggler = -1;
    entry->schedule = std::make_shared<const PackedSchedule>(synthesize_canonical(canonical));
  }
  if (verify && !entry->verified) {
    verify_or_throw(*entry->schedule);  // once per (algorithm, n, K) and process
    entry->verified = true;
  }
  return entry->schedule;
}

Plan compile_relabeled(const PackedSchedule& p, int straggler, int rank) {
  return compile_relabeled(p, straggler >= 0 ? straggler_relabeling(p.header().nranks, straggler) : std::vector<int>{},
                           rank);
}

Plan compile_relabeled(const PackedSchedule& p, const std::vector<int>& perm, int rank) {
  const ScheduleHeader& h = p.header();
  if (rank < 0 || rank >= h.nranks)
    throw Error(ErrorCode::InvalidUsage,
                "compile: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(h.nranks) + ")");
  if (!perm.empty() && static_cast<int>(perm.size()) != h.nranks)
    throw Error(ErrorCode::InvalidUsage, "compile: permutation of " + std::to_string(perm.size()) +
                                             " ranks, expected " + std::to_string(h.nranks));
  const int q = perm.empty() ? rank : inverse(perm)[static_cast<std::size_t>(rank)];  // canonical rank that becomes `rank`
  const auto name = [&](int r) { return perm.empty() ? r : perm[static_cast<std::size_t>(r)]; };
  // The transfers of q, renamed, in a schedule of otherwise empty rounds: compile() sees there
  // exactly what it sees of `rank` in the relabelled schedule, so the plan is the same.
  Schedule mine;
  mine.algorithm = h.algorithm;
  mine.nranks = h.nranks;
  mine.straggler = h.straggler ? std::optional<int>(name(*h.straggler)) : std::nullopt;
  for (int r : h.stragglers) mine.stragglers.push_back(name(r));
  std::sort(mine.stragglers.begin(), mine.stragglers.end());
  mine.nchunks = h.nchunks;
  mine.ports = h.ports;
  mine.phases.reserve(p.phases().size());
  for (const PackedSchedule::PhaseInfo& ph : p.phases())
    mine.phases.push_back(Phase{ph.name, ph.waits_for_straggler, std::vector<Round>(ph.end_round - ph.first_round)});
  std::size_t phase = 0, round = 0;  // advance with t: transfers come in schedule order
  p.for_each_of_rank(q, [&](std::size_t t) {
    while (p.round_begin(round + 1) <= t) ++round;
    while (p.phases()[phase].end_round <= round) ++phase;
    int one = 0;
    const std::span<const int> cs = p.chunks(t, one);
    mine.phases[phase].rounds[round - p.phases()[phase].first_round].push_back(
        Transfer{name(p.src(t)), name(p.dst(t)), ChunkList(cs.begin(), cs.end()), p.op(t)});
  });
  return compile(mine, rank);
}

std::shared_ptr<const Schedule> cached_schedule(const ScheduleKey& key, bool verify) {
  const ScheduleKey k = normalized(key);
  const std::shared_ptr<const PackedSchedule> canonical = cached_canonical(k, verify);
  Caches& c = caches();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (auto it = c.schedules.find(full_key(k)); it != c.schedules.end())
      if (auto s = it->second.lock()) return s;
  }
  ScheduleCollector collect;
  const std::vector<int> perm = relabeling_of(k);
  canonical->emit(collect, perm.empty() ? nullptr : &perm);
  auto s = std::make_shared<const Schedule>(collect.take());
  std::lock_guard<std::mutex> lock(c.mutex);
  std::erase_if(c.schedules, [](const auto& e) { return e.second.expired(); });
  c.schedules[full_key(k)] = s;
  return s;
}

std::shared_ptr<const Plan> cached_plan(const ScheduleKey& key, int rank, bool verify) {
  const ScheduleKey k = normalized(key);
  if (rank < 0 || rank >= k.nranks)
    throw Error(ErrorCode::InvalidUsage, "plan cache: rank " + std::to_string(rank) + " is outside [0, " +
                                             std::to_string(k.nranks) + ")");
  const std::shared_ptr<const PackedSchedule> canonical = cached_canonical(k, verify);
  Caches& c = caches();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (PlanEntry& e : c.plans)
      if (e.key == k && e.rank == rank) {
        e.used = ++c.clock;
        return e.plan;
      }
  }
  auto plan = std::make_shared<const Plan>(compile_relabeled(*canonical, relabeling_of(k), rank));
  std::lock_guard<std::mutex> lock(c.mutex);
  for (PlanEntry& e : c.plans)  // another thread may have compiled it meanwhile
    if (e.key == k && e.rank == rank) return e.plan;
  if (c.plans.size() >= kPlansKept) {
    auto oldest = std::min_element(c.plans.begin(), c.plans.end(),
                                   [](const PlanEntry& a, const PlanEntry& b) { return a.used < b.used; });
    c.plans.erase(oldest);
  }
  c.plans.push_back(PlanEntry{k, rank, plan, ++c.clock});
  return plan;
}

void clear_plan_cache() {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.canonical.clear();
  c.plans.clear();
  c.schedules.clear();
}

}  // namespace stragglar::detail
