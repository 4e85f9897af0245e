// StragglAR (paper §3): a ReduceScatter among the n-1 non-stragglers that runs during the
// straggler's delay, then an `allreduce` phase in which the straggler reduces one chunk per
// round with one rank while already-full chunks spread among the others.
//
// Which builder makes the `allreduce` phase (all synthesize with σ = n-1, then relabel):
//   n = 2^k         → Algorithm 1 of the paper (stragglar_pow2.cpp), K(n-1)+log2 n-1 rounds.
//   K = 1, n in the upper third below 2^L → Algorithm 1's structure with 2^L − n "double"
//                     ranks (stragglar_near_pow2.cpp), at the bound n + L − 2.
//   any other n     → the per-round min-cost flow of stragglar_deadline.cpp. With the
//                     builder above every n ≤ 256, even and odd, is at the bound for K = 1
//                     (docs/schedules.md); the paper's LEMON matching method
//                     (stragglar_matching.cpp) is the fallback should the flow give up.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "schedule/schedule_sink.hpp"
#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar {

namespace {
// kMaxPipeline (synthesize.hpp) bounds K for every API; this bounds K·(n-1) chunks.
constexpr int kMaxChunks = 1 << 16;
}  // namespace

int stragglar_round_bound(int nranks) {
  require(nranks >= kMinRanks && nranks <= kMaxRanks,
          "stragglar_round_bound: nranks = " + std::to_string(nranks) + ", expected " +
              std::to_string(kMinRanks) + ".." + std::to_string(kMaxRanks));
  // The straggler reduces one chunk per round (n-1 rounds); the last chunk is then full on two
  // ranks and must reach n, at best doubling per round: ⌈log2 n⌉ - 1 more rounds.
  return nranks + detail::ceil_log2(nranks) - 2;
}

int parse_pipeline(std::string_view text) {
  if (text == "auto") return kPipelineAuto;
  const std::string s(text);
  try {
    std::size_t used = 0;
    const int k = std::stoi(s, &used);
    if (used == s.size() && k >= 1 && k <= kMaxPipeline) return k;
  } catch (const std::exception&) {  // not a number, or out of int range: the error below
  }
  throw Error(ErrorCode::InvalidUsage, "pipeline '" + s + "': expected an integer K in [1, " +
                                           std::to_string(kMaxPipeline) + "] or auto");
}

int choose_pipeline(int nranks, std::size_t bytes, const CostModel& cost) {
  require(nranks >= kMinRanks && nranks <= kMaxRanks,
          "choose_pipeline: nranks = " + std::to_string(nranks) + ", expected " +
              std::to_string(kMinRanks) + ".." + std::to_string(kMaxRanks));
  if (bytes == 0) return 1;
  const int m = nranks - 1;
  const int L = detail::ceil_log2(nranks);
  // Exposed time of the allreduce phase with K(n-1) chunks c = bytes/(Km) and K(n-1)+L-1
  // rounds: in the first Km the straggler's pair also reduces its chunk (γ), the last L-1 copy:
  //   T(K) = Km·(α + (β+γ)·c) + (L - 1)·(α + β·c)      (γ = 0: the paper's α-β model).
  auto modelled = [&](int K) {
    const double chunks = static_cast<double>(K) * m;
    const double c = static_cast<double>(bytes) / chunks;
    return chunks * (cost.alpha_s + (cost.beta_s_per_byte + cost.gamma_s_per_byte) * c) +
           (L - 1) * (cost.alpha_s + cost.beta_s_per_byte * c);
  };
  const int k_max = static_cast<int>(std::min<std::size_t>(
      {static_cast<std::size_t>(kMaxPipeline), static_cast<std::size_t>(kMaxChunks / m),
       std::max<std::size_t>(1, bytes / static_cast<std::size_t>(m))}));
  int best = 1;
  double best_time = modelled(1);
  for (int K = 2; K <= k_max; ++K) {
    const double t = modelled(K);
    if (t < best_time) {
      best = K;
      best_time = t;
    } else if (t > best_time * 1.5) {
      break;  // T(K) is convex in K: past the minimum it only grows
    }
  }
  return best;
}

namespace detail {

int ceil_log2(int n) {
  int L = 0;
  while ((1 << L) < n) ++L;
  return L;
}

void add_straggler_exchange(Round& round, int n, int r, int partner) {
  const int sigma = n - 1;
  // Both directions reduce: σ adds the partial sum of the others, the partner adds σ's data.
  round.push_back({partner, sigma, {r}, TransferOp::reduce});
  round.push_back({sigma, partner, {r}, TransferOp::reduce});
}

void add_straggler_exchange(Round& round, int n, int r) { add_straggler_exchange(round, n, r, r % (n - 1)); }

void RoundSorter::operator()(Round& round) {
  // Single-port rounds have distinct senders: a bucket per sender orders them in O(n).
  int max_src = -1;
  for (const Transfer& t : round) max_src = std::max(max_src, t.src);
  slot_.assign(static_cast<std::size_t>(max_src + 1), -1);
  bool distinct = true;
  for (std::size_t i = 0; i < round.size() && distinct; ++i) {
    int& s = slot_[static_cast<std::size_t>(round[i].src)];
    distinct = s < 0;
    s = static_cast<int>(i);
  }
  if (distinct) {
    sorted_.clear();
    sorted_.reserve(round.size());
    for (int i : slot_)
      if (i >= 0) sorted_.push_back(std::move(round[static_cast<std::size_t>(i)]));
    round.swap(sorted_);
  } else {
    std::sort(round.begin(), round.end(), [](const Transfer& a, const Transfer& b) {
      return std::pair(a.src, a.dst) < std::pair(b.src, b.dst);
    });
  }
}

void canonicalize(std::vector<Round>& rounds) {
  RoundSorter sort;  // buffer reused across rounds (swapped with each round)
  for (Round& round : rounds) sort(round);
}

Schedule synthesize_stragglar(int n, int straggler, const SynthOptions& opts) {
  require(n >= kMinRanks && n <= kMaxRanks,
          "stragglar: nranks = " + std::to_string(n) + ", expected " + std::to_string(kMinRanks) +
              ".." + std::to_string(kMaxRanks));
  require(straggler >= 0 && straggler < n,
          "stragglar: straggler = " + std::to_string(straggler) + ", expected 0.." + std::to_string(n - 1));
  require(opts.pipeline >= 0 && opts.pipeline <= kMaxPipeline,
          "stragglar: pipeline = " + std::to_string(opts.pipeline) + ", expected 0 (auto) or 1.." +
              std::to_string(kMaxPipeline));
  const int K = opts.pipeline == kPipelineAuto ? choose_pipeline(n, opts.bytes, opts.cost) : opts.pipeline;
  ScheduleCollector schedule;
  if (straggler == n - 1) {
    emit_stragglar(n, K, schedule);
  } else {
    const std::vector<int> perm = straggler_relabeling(n, straggler);
    RelabelingSink relabeled(perm, schedule);
    emit_stragglar(n, K, relabeled);
  }
  return schedule.take();
}

void emit_stragglar(int n, int K, ScheduleSink& out) {
  require(n >= kMinRanks && n <= kMaxRanks,
          "stragglar: nranks = " + std::to_string(n) + ", expected " + std::to_string(kMinRanks) +
              ".." + std::to_string(kMaxRanks));
  require(K >= 1 && K <= kMaxPipeline,
          "stragglar: pipeline = " + std::to_string(K) + ", expected 1.." + std::to_string(kMaxPipeline));
  const int m = n - 1;
  require(static_cast<long long>(K) * m <= kMaxChunks,
          "stragglar: pipeline = " + std::to_string(K) + " gives " + std::to_string(static_cast<long long>(K) * m) +
              " chunks on " + std::to_string(n) + " ranks, expected at most " + std::to_string(kMaxChunks));
  out.begin(ScheduleHeader{"stragglar", n, n - 1, K * m, 1, {}});

  // Precondition (§3.1): rank i ends with the partial sum over ranks 0..n-2 of chunks
  // {i, i+m, ..., i+(K-1)m} — exactly the chunks it reduces with σ in rounds i, i+m, ...
  // (unless it is a donor of the near-power-of-two builder and forwards its sum in round 0).
  std::vector<int> members(m);
  std::vector<std::vector<int>> groups(m);
  for (int i = 0; i < m; ++i) {
    members[i] = i;
    for (int k = 0; k < K; ++k) groups[i].push_back(i + k * m);
  }
  const RoundFn emit = [&](Round& round) { out.add_round(round); };
  out.begin_phase("reduce_scatter", false);
  ring_reduce_scatter(members, groups, emit);

  out.begin_phase("allreduce", true);
  const bool pow2 = (n & (n - 1)) == 0;
  if (pow2) {
    stragglar_pow2_rounds(n, K, emit);  // round by round: the largest n are powers of two
    out.end();
    return;
  }
  std::vector<Round> ar;
  if (auto near = K == 1 ? stragglar_near_pow2_rounds(n) : std::nullopt) {
    ar = std::move(*near);
  } else if (auto rounds = stragglar_deadline_rounds(n, K, K * m + ceil_log2(n) - 1)) {
    ar = std::move(*rounds);
  } else {
    ar = stragglar_matching_rounds(n, K);
  }
  for (Round& round : ar) out.add_round(round);
  out.end();
}

}  // namespace detail
}  // namespace stragglar
