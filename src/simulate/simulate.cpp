// α-β simulator (DESIGN.md "Simulator"; the paper's analytical model, §4.3).
#include "stragglar/simulate.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

// Bytes each rank sends / receives in one round; a transfer moves |chunks|·s/nchunks bytes.
struct RoundLoad {
  std::unordered_map<int, double> sent, received;
  double most = 0;  // the largest send or receive volume of any rank
};

RoundLoad load_of(const Round& round, double chunk_bytes) {
  RoundLoad l;
  for (const Transfer& t : round) {
    const double b = static_cast<double>(t.chunks.size()) * chunk_bytes;
    l.most = std::max({l.most, l.sent[t.src] += b, l.received[t.dst] += b});
  }
  return l;
}

void check_cost(const CostModel& cost) {
  require(cost.alpha_s >= 0, "alpha = " + std::to_string(cost.alpha_s) + " s, expected >= 0");
  require(cost.beta_s_per_byte > 0, "beta = " + std::to_string(cost.beta_s_per_byte) + " s/B, expected > 0 (a finite bandwidth)");
}

}  // namespace

double lockstep_time_s(const Schedule& s, std::size_t bytes, const CostModel& cost, bool waiting_phases_only) {
  check_cost(cost);
  const double chunk_bytes = static_cast<double>(bytes) / s.nchunks;
  double t = 0;
  for (const Phase& p : s.phases) {
    if (waiting_phases_only && !p.waits_for_straggler) continue;
    for (const Round& r : p.rounds)
      if (!r.empty()) t += cost.alpha_s + cost.beta_s_per_byte * load_of(r, chunk_bytes).most;
  }
  return t;
}

EventResult simulate_events(const Schedule& s, std::size_t bytes, const CostModel& cost,
                            const std::vector<double>& arrival_s) {
  check_cost(cost);
  require(static_cast<int>(arrival_s.size()) == s.nranks,
          "arrival times: " + std::to_string(arrival_s.size()) + " given, expected one per rank (" +
              std::to_string(s.nranks) + ")");
  const double chunk_bytes = static_cast<double>(bytes) / s.nchunks;
  std::vector<double> ready = arrival_s;  // when each rank has finished everything so far
  for (const Phase& p : s.phases)
    for (const Round& r : p.rounds) {
      const RoundLoad load = load_of(r, chunk_bytes);
      std::unordered_map<int, double> done;  // rank -> end of its last transfer this round
      for (const Transfer& t : r) {
        // Both ends must have finished their previous rounds; with several ports the
        // transfer shares the sender's and the receiver's bandwidth with the round's others.
        const double start = std::max(ready[t.src], ready[t.dst]);
        const double end = start + cost.alpha_s +
                           cost.beta_s_per_byte * std::max(load.sent.at(t.src), load.received.at(t.dst));
        double& a = done[t.src];
        a = std::max(a, end);
        double& b = done[t.dst];
        b = std::max(b, end);
      }
      for (const auto& [rank, end] : done) ready[rank] = end;
    }
  EventResult out;
  out.finish_s = ready;
  out.last_finish_s = *std::max_element(ready.begin(), ready.end());
  return out;
}

SimResult simulate(const Schedule& s, std::size_t bytes, const CostModel& cost, Delay delay) {
  require(delay.ideal || delay.seconds >= 0,
          "delay = " + std::to_string(delay.seconds) + " s, expected >= 0 or ideal");
  const int late = s.straggler.value_or(s.nranks - 1);
  std::vector<double> arrival(static_cast<std::size_t>(s.nranks), 0.0);
  SimResult res;
  res.rounds = s.total_rounds();
  if (delay.ideal) {
    // Just long enough for the others to finish every phase that does not wait for the
    // straggler: run those phases alone.
    Schedule early = s;
    std::erase_if(early.phases, [](const Phase& p) { return p.waits_for_straggler; });
    res.delay_s = early.phases.empty() ? 0.0 : simulate_events(early, bytes, cost, arrival).last_finish_s;
  } else {
    res.delay_s = delay.seconds;
  }
  arrival[late] = res.delay_s;
  res.time_s = simulate_events(s, bytes, cost, arrival).last_finish_s;
  res.exposed_s = res.time_s - res.delay_s;
  return res;
}

}  // namespace stragglar
