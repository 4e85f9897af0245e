// Hierarchical StragglAR for a late host: the k late ranks are one host's,
// hosts hold k consecutive ranks each (host-major: host h = ranks h·k .. h·k+k-1), so there
// are H = n/k hosts. The host is reduced inside first and treated as one straggler among hosts:
// StragglAR (paper §3) runs across hosts, once per local index i on segment i of the buffer.
//
// Synthesized with the late host last (ranks (H-1)k .. Hk-1), then relabelled onto the set.
// Chunks: k segments × K(H-1) chunks (K: the pipeline factor of StragglAR across hosts, so
// that the inter-host rounds move s/(kK(H-1)) each and the hosts' links stay busy: without it
// StragglAR's first rounds leave most links idle); chunk i·K(H-1)+c is chunk c of segment i.
//   `host_reduce_scatter`  (no wait)  ring ReduceScatter inside every punctual host: local rank
//                                     i ends with its host's sum of segment i;
//   `cross_reduce_scatter` (no wait)  per i, StragglAR's ReduceScatter among the punctual hosts'
//                                     rank i (ring, one chunk of segment i each);
//   `late_host_reduce_scatter` (waits) the same ring inside the late host;
//   `cross_allreduce`      (waits)    per i, StragglAR's `allreduce` phase over the H ranks with
//                                     local index i, the late host's rank i the straggler;
//   `host_allgather`       (waits)    ring AllGather of the k segments inside every host.
// After the late host arrives: (k-1) intra-host rounds of s/k, StragglAR's K(H-1) + ⌈log2 H⌉ − 1
// rounds of s/(kK(H-1)) across hosts, (k-1) intra-host rounds of s/k. Between hosts a rank moves
// ~s/k bytes instead of stragglar-k's ~s: it wins where inter-host links are the slow ones
// (docs/algorithms.md "Hierarchical").
#include <algorithm>
#include <limits>
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"
#include "synth/stragglar_internal.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar::detail {

// StragglAR's own limit on K(H-1) applies too; this caps the whole buffer's chunks.
constexpr long long kMaxHierarchicalChunks = 1 << 16;

namespace {

// Appends `parts` (one list of rounds per local index, on disjoint ranks) as one phase whose
// round j is the union of every part's round j.
void add_parallel_phase(Schedule& s, const std::string& name, bool waits, const std::vector<std::vector<Round>>& parts) {
  Phase phase{name, waits, {}};
  std::size_t rounds = 0;
  for (const std::vector<Round>& p : parts) rounds = std::max(rounds, p.size());
  phase.rounds.resize(rounds);
  for (const std::vector<Round>& p : parts)
    for (std::size_t j = 0; j < p.size(); ++j)
      phase.rounds[j].insert(phase.rounds[j].end(), p[j].begin(), p[j].end());
  std::erase_if(phase.rounds, [](const Round& r) { return r.empty(); });
  s.phases.push_back(std::move(phase));
}

}  // namespace

Schedule synthesize_hierarchical(int n, const std::vector<int>& late, const SynthOptions& opts) {
  const int k = static_cast<int>(late.size());
  require(k >= 1 && 2 * k <= n && n % k == 0,
          "hierarchical: " + std::to_string(k) + " late ranks on " + std::to_string(n) +
              " ranks, expected the ranks of one host: k <= n/2 dividing n (hosts of k ranks)");
  require(late.front() % k == 0 && late.back() == late.front() + k - 1,
          "hierarchical: late ranks " + std::to_string(late.front()) + ".." + std::to_string(late.back()) +
              ", expected one whole host: " + std::to_string(k) + " consecutive ranks starting at a multiple of " +
              std::to_string(k));
  const int H = n / k;  // hosts
  const int K = opts.pipeline == kPipelineAuto ? choose_hierarchical_pipeline(n, late, opts.bytes, opts.cost) : opts.pipeline;
  require(K >= 1 && static_cast<long long>(K) * (H - 1) * k <= kMaxHierarchicalChunks,
          "hierarchical: pipeline = " + std::to_string(K) + ", expected 1.." +
              std::to_string(std::max<long long>(1, kMaxHierarchicalChunks / (static_cast<long long>(H - 1) * k))));
  const int m = K * (H - 1);  // chunks per segment
  const int late_host = H - 1;
  auto rank_of = [k](int host, int local) { return host * k + local; };
  auto chunk_of = [m](int segment, int c) { return segment * m + c; };

  Schedule s;
  s.algorithm = "hierarchical";
  s.nranks = n;
  s.nchunks = k * m;
  s.ports = 1;
  if (k == 1) s.straggler = n - 1;
  else
    for (int i = 0; i < k; ++i) s.stragglers.push_back(rank_of(late_host, i));

  // Segment groups inside a host: local rank i owns segment i.
  std::vector<std::vector<int>> segments(static_cast<std::size_t>(k));
  for (int i = 0; i < k; ++i)
    for (int c = 0; c < m; ++c) segments[i].push_back(chunk_of(i, c));
  auto host_members = [&](int host) {
    std::vector<int> v;
    for (int i = 0; i < k; ++i) v.push_back(rank_of(host, i));
    return v;
  };

  std::vector<std::vector<Round>> parts;
  for (int h = 0; h < late_host; ++h) parts.push_back(ring_reduce_scatter(host_members(h), segments));
  add_parallel_phase(s, "host_reduce_scatter", false, parts);

  // StragglAR over the H ranks with local index i: its ranks 0..H-1 are hosts, H-1 the straggler.
  SynthOptions cross_opts;
  cross_opts.pipeline = K;
  const Schedule cross = synthesize_stragglar(H, H - 1, cross_opts);
  auto mapped = [&](const Phase& phase, int i) {
    std::vector<Round> rounds = phase.rounds;
    for (Round& r : rounds)
      for (Transfer& t : r) {
        t.src = rank_of(t.src, i);
        t.dst = rank_of(t.dst, i);
        for (int& c : t.chunks) c = chunk_of(i, c);
      }
    return rounds;
  };
  parts.clear();
  for (int i = 0; i < k; ++i) parts.push_back(mapped(cross.phases.front(), i));
  add_parallel_phase(s, "cross_reduce_scatter", false, parts);

  parts.assign(1, ring_reduce_scatter(host_members(late_host), segments));
  add_parallel_phase(s, "late_host_reduce_scatter", true, parts);

  parts.clear();
  for (int i = 0; i < k; ++i) parts.push_back(mapped(cross.phases.back(), i));
  add_parallel_phase(s, "cross_allreduce", true, parts);

  parts.clear();
  for (int h = 0; h < H; ++h) parts.push_back(ring_allgather(host_members(h), segments));
  add_parallel_phase(s, "host_allgather", true, parts);
  std::erase_if(s.phases, [](const Phase& p) { return p.rounds.empty(); });
  canonicalize(s.phases.back().rounds);

  return relabel(std::move(s), k == 1 ? straggler_relabeling(n, late.front()) : late_set_relabeling(n, late));
}

}  // namespace stragglar::detail

namespace stragglar {

// Simulated, not a closed form: the intra-host phases, the shared host links and the rounds
// of StragglAR's pipeline interact. The smallest K within 1 % of the best
// modelled time: every round also pays what the model leaves out (waking the peer, a TCP
// message's start), so past the knee more rounds lose on a real link what the model gains.
// The search stops once three K in a row gain less than 1 %.
int choose_hierarchical_pipeline(int n, const std::vector<int>& late, std::size_t bytes, const CostModel& cost) {
  if (bytes == 0 || late.empty()) return 1;
  const int k = static_cast<int>(late.size());
  const long long per_k = static_cast<long long>(n / k - 1) * k;  // chunks at K = 1
  // The schedule's premise: hosts of k ranks whose links to each other are the slow ones (the
  // reason to reduce inside a host first). K is chosen for links at least 10x slower than a
  // rank's port even where the model has them as fast (not measured: auto's one link class):
  // there K changes the modelled time by a few per cent, on a slow link by tens.
  CostModel c = cost;
  c.ranks_per_host = k;
  c.inter_beta_s_per_byte = std::max(cost.ranks_per_host == k ? cost.inter_beta_s_per_byte : 0.0, 10 * c.beta_s_per_byte);
  std::vector<double> modelled;  // modelled[K - 1]
  double best_s = std::numeric_limits<double>::infinity();
  int flat = 0;  // K in a row that gained < 1 % on the best so far: the curve has flattened
  for (int K = 1; K <= 64 && K * per_k <= detail::kMaxHierarchicalChunks && flat < 3; ++K) {
    SynthOptions o;
    o.pipeline = K;
    const double t = simulate(detail::synthesize_hierarchical(n, late, o), bytes, c, Delay{true, 0}, late).exposed_s;
    modelled.push_back(t);
    flat = t < 0.99 * best_s ? 0 : flat + 1;
    best_s = std::min(best_s, t);
  }
  for (std::size_t K = 1; K <= modelled.size(); ++K)
    if (modelled[K - 1] <= 1.01 * best_s) return static_cast<int>(K);
  return 1;
}

}  // namespace stragglar
