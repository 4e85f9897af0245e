// α-β simulator (docs/design.md "Simulator"; the paper's analytical model, §4.3).
#include "stragglar/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <utility>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

// Wire time (β·bytes) each rank's port spends sending / receiving in one round, and the bytes
// it reduces; a transfer moves |chunks|·s/nchunks bytes. With hosts, a host's ranks share one
// link to the others, each direction: `host_out`/`host_in` hold the wire time (inter-host β) of
// the round's inter-host bytes summed over the host's ranks, which bounds every such transfer.
struct RoundLoad {
  std::unordered_map<int, double> sent, received, reduced;
  std::unordered_map<int, double> host_out, host_in;
};

RoundLoad load_of(const Round& round, double chunk_bytes, const CostModel& cost) {
  RoundLoad l;
  for (const Transfer& t : round) {
    const double b = static_cast<double>(t.chunks.size()) * chunk_bytes;
    l.sent[t.src] += cost.beta_s_per_byte * b;
    l.received[t.dst] += cost.beta_s_per_byte * b;
    if (t.op == TransferOp::reduce) l.reduced[t.dst] += b;
    if (cost.crosses_hosts(t.src, t.dst)) {
      const double wire = cost.inter_beta_s_per_byte * b;
      l.host_out[cost.host_of(t.src)] += wire;
      l.host_in[cost.host_of(t.dst)] += wire;
    }
  }
  return l;
}

double reduced_by(const RoundLoad& l, int rank) {
  const auto it = l.reduced.find(rank);
  return it == l.reduced.end() ? 0.0 : it->second;
}

// The wire time of transfer t in its round: its ends' ports, and the hosts' links it crosses.
double wire_time_s(const RoundLoad& l, const Transfer& t, const CostModel& cost) {
  double w = std::max(l.sent.at(t.src), l.received.at(t.dst));
  if (cost.crosses_hosts(t.src, t.dst))
    w = std::max({w, l.host_out.at(cost.host_of(t.src)), l.host_in.at(cost.host_of(t.dst))});
  return w;
}

// Lock-step round time: α + the slowest rank's β·(its larger direction) + γ·(what it reduces),
// or the busiest host link's wire time if that is longer.
// (With several ports this charges each rank its own volume; the event mode, which lets a
// receiver wait for its sender's shared bandwidth, can be slower there. Single-port: equal.)
double round_time_s(const RoundLoad& l, const CostModel& cost) {
  double slowest = 0;
  for (const auto& [rank, sent] : l.sent) slowest = std::max(slowest, sent);
  for (const auto& [rank, received] : l.received)
    slowest = std::max(slowest, received + cost.gamma_s_per_byte * reduced_by(l, rank));
  for (const auto& [host, out] : l.host_out) slowest = std::max(slowest, out);
  for (const auto& [host, in] : l.host_in) slowest = std::max(slowest, in);
  return cost.alpha_s + slowest;
}

void check_cost(const CostModel& cost) {
  require(cost.alpha_s >= 0, "alpha = " + std::to_string(cost.alpha_s) + " s, expected >= 0");
  require(cost.beta_s_per_byte > 0, "beta = " + std::to_string(cost.beta_s_per_byte) + " s/B, expected > 0 (a finite bandwidth)");
  require(cost.gamma_s_per_byte >= 0, "gamma = " + std::to_string(cost.gamma_s_per_byte) + " s/B, expected >= 0");
  require(cost.ranks_per_host >= 0, "ranks per host = " + std::to_string(cost.ranks_per_host) + ", expected >= 0");
  require(cost.ranks_per_host == 0 || (cost.inter_beta_s_per_byte > 0 && std::isfinite(cost.inter_beta_s_per_byte)),
          "inter-host beta = " + std::to_string(cost.inter_beta_s_per_byte) + " s/B, expected > 0 with hosts");
  require(std::isfinite(cost.alpha_s) && std::isfinite(cost.beta_s_per_byte) && std::isfinite(cost.gamma_s_per_byte),
          "alpha, beta, gamma = " + std::to_string(cost.alpha_s) + ", " + std::to_string(cost.beta_s_per_byte) + ", " +
              std::to_string(cost.gamma_s_per_byte) + ": expected finite values (a bandwidth too small to represent?)");
}

// The ranks a schedule waits for: those it names, else the last.
std::vector<int> default_late(const Schedule& s) {
  std::vector<int> late = s.late_ranks();
  if (late.empty()) late.push_back(s.nranks - 1);
  return late;
}

}  // namespace

double lockstep_time_s(const Schedule& s, std::size_t bytes, const CostModel& cost, bool waiting_phases_only,
                       const RoundOverhead& overhead) {
  check_cost(cost);
  const double h = overhead.host_s(s.algorithm, s.nranks, bytes);
  const double chunk_bytes = static_cast<double>(bytes) / s.nchunks;
  double t = 0;
  int enqueued = 0;
  for (const Phase& p : s.phases) {
    if (waiting_phases_only && !p.waits_for_straggler) continue;
    for (const Round& r : p.rounds)
      if (!r.empty()) t = std::max(t, ++enqueued * h) + round_time_s(load_of(r, chunk_bytes, cost), cost);
  }
  return t;
}

EventResult simulate_events(const Schedule& s, std::size_t bytes, const CostModel& cost,
                            const std::vector<double>& arrival_s, const RoundOverhead& overhead) {
  check_cost(cost);
  require(static_cast<int>(arrival_s.size()) == s.nranks,
          "arrival times: " + std::to_string(arrival_s.size()) + " given, expected one per rank (" +
              std::to_string(s.nranks) + ")");
  const double h = overhead.host_s(s.algorithm, s.nranks, bytes);
  const double chunk_bytes = static_cast<double>(bytes) / s.nchunks;
  std::vector<double> ready = arrival_s;     // when each rank has finished everything so far
  std::vector<double> enqueued = arrival_s;  // when each rank's host has enqueued its rounds so far
  for (const Phase& p : s.phases)
    for (const Round& r : p.rounds) {
      const RoundLoad load = load_of(r, chunk_bytes, cost);
      if (h > 0) {  // every rank of the round enqueues it once, h after its previous one
        std::unordered_map<int, bool> seen;
        for (const Transfer& t : r)
          for (int rank : {t.src, t.dst})
            if (!std::exchange(seen[rank], true)) enqueued[static_cast<std::size_t>(rank)] += h;
      }
      std::unordered_map<int, double> done;  // rank -> end of its last transfer this round
      for (const Transfer& t : r) {
        // Both ends must have finished their previous rounds and enqueued this one; with
        // several ports the transfer shares the sender's and the receiver's bandwidth with the
        // round's others, and between hosts the hosts' links with the round's other inter-host
        // transfers.
        const double start = std::max({ready[t.src], ready[t.dst], enqueued[t.src], enqueued[t.dst]});
        const double end = start + cost.alpha_s + wire_time_s(load, t, cost);
        double& a = done[t.src];
        a = std::max(a, end);
        // The receiver then reduces what it got (γ): it is busy, the sender is not.
        const double reduce_s = t.op == TransferOp::reduce ? cost.gamma_s_per_byte * reduced_by(load, t.dst) : 0.0;
        double& b = done[t.dst];
        b = std::max(b, end + reduce_s);
      }
      for (const auto& [rank, end] : done) ready[rank] = end;
    }
  EventResult out;
  out.finish_s = ready;
  out.last_finish_s = *std::max_element(ready.begin(), ready.end());
  return out;
}

SimResult simulate(const Schedule& s, std::size_t bytes, const CostModel& cost, Delay delay) {
  return simulate(s, bytes, cost, delay, default_late(s));
}

SimResult simulate(const Schedule& s, std::size_t bytes, const CostModel& cost, Delay delay, const std::vector<int>& late,
                   const RoundOverhead& overhead) {
  require(delay.ideal || delay.seconds >= 0,
          "delay = " + std::to_string(delay.seconds) + " s, expected >= 0 or ideal");
  require(!late.empty(), "late ranks: none given, expected at least one");
  for (int r : late)
    require(r >= 0 && r < s.nranks,
            "late rank " + std::to_string(r) + ", expected a rank in [0, " + std::to_string(s.nranks) + ")");
  std::vector<double> arrival(static_cast<std::size_t>(s.nranks), 0.0);
  SimResult res;
  res.rounds = s.total_rounds();
  if (delay.ideal) {
    // Just long enough for the others to finish every phase that does not wait for the
    // straggler: run those phases alone.
    Schedule early = s;
    std::erase_if(early.phases, [](const Phase& p) { return p.waits_for_straggler; });
    res.delay_s = early.phases.empty() ? 0.0 : simulate_events(early, bytes, cost, arrival, overhead).last_finish_s;
  } else {
    res.delay_s = delay.seconds;
  }
  for (int r : late) arrival[static_cast<std::size_t>(r)] = res.delay_s;
  res.time_s = simulate_events(s, bytes, cost, arrival, overhead).last_finish_s;
  res.exposed_s = res.time_s - res.delay_s;
  return res;
}

SimResult simulate_arrival_tickets(const Schedule& stragglar, const Schedule& symmetric, std::size_t bytes,
                                   const CostModel& cost, double delay_s, ArrivalTicketCost t,
                                   const RoundOverhead& overhead) {
  require(delay_s >= 0 && t.grace_s >= 0 && t.decision_s >= 0,
          "arrival tickets: delay " + std::to_string(delay_s) + " s, grace " + std::to_string(t.grace_s) +
              " s, decision " + std::to_string(t.decision_s) + " s, expected >= 0");
  require(stragglar.nranks == symmetric.nranks && stragglar.straggler.has_value(),
          "arrival tickets: expected a schedule told a straggler and a symmetric one of the same rank count");
  if (delay_s < t.grace_s) {  // in time: the symmetric schedule, after the last rank's own decision
    SimResult r = simulate(symmetric, bytes, cost, Delay{false, delay_s}, default_late(symmetric), overhead);
    r.time_s += t.decision_s;
    r.exposed_s += t.decision_s;
    return r;
  }
  const double start = t.grace_s + t.decision_s;
  std::vector<double> arrival(static_cast<std::size_t>(stragglar.nranks), start);
  // The straggler cannot start before the decision it reads.
  arrival[static_cast<std::size_t>(*stragglar.straggler)] = std::max(delay_s, start);
  SimResult r;
  r.rounds = stragglar.total_rounds();
  r.delay_s = delay_s;
  r.time_s = simulate_events(stragglar, bytes, cost, arrival, overhead).last_finish_s;
  r.exposed_s = r.time_s - delay_s;
  return r;
}

}  // namespace stragglar
