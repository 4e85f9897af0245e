// StragglAR `allreduce` phase for n = 2^k: the paper's Algorithm 1 (§3.1; proofs in appendix
// "Proof of Communication Complexity", Lemmas 1-2, Remark 1, Theorem 1).
//
// L = log2 n, m = n-1, σ = n-1, chunks c_0 .. c_{Km-1}. A chunk is *active* from the round
// after it became full (paired with σ) until every rank holds it. The invariant of the paper:
// from round L on, every non-straggler holds exactly one active chunk, every active chunk
// doubles its holders each round, and the oldest one, c_{r-L}, completes in round r.
//
//   Phase 1 (rounds 1 .. L-1, Lemma 1): rank r-1 sends c_{r-1} to rank r-1+L; every other
//     holder of an active chunk sends it to a chunk-free rank g > 2(L-1).
//   Phase 2 (rounds ≥ L, Lemma 2): P_r = holders of the oldest active chunk c_{r-L},
//     Q_r = holders of the others; rank r mod m (busy with σ) is in P_r. Match P_r \ {busy}
//     with Q_r perfectly: p sends c_{r-L} to q (completing it), q sends its chunk to p.
//     Critical window: a rank p that pairs with σ in round g > r must by then hold only
//     c_{g-L}, so it may only receive a chunk c_j with j + L ≤ g.
//   Tail (rounds ≥ Km, Remark 1): σ holds everything, joins Q_r and sends the last chunk,
//     which therefore needs only L-1 doublings.
//
// n = 4 (L = 2, σ = 3), rank × chunk state after each round; "." = partial or own data,
// "F" = full (sum over all 4 ranks), <-> = reduce exchange with σ, -> = copy:
//
//                 c0 c1 c2   transfers
//   after RS  r0  .  .  .    (rank i holds the partial sum of c_i over ranks 0..2)
//   round 0   r0  F  .  .    0<->3 c0
//             r3  F  .  .
//   round 1   r1  .  F  .    1<->3 c1;  0->2 c0            (phase 1: r-1 -> r-1+L)
//             r2  F  .  .
//             r3  F  F  .
//   round 2   r2  F  .  F    2<->3 c2;  0->1 c0, 1->0 c1   (P={0,2}\{2}, Q={1})
//             r1  F  F  .               c0 complete
//             r0  F  F  .
//   round 3   r0  F  F  F    1->2 c1, 2->1 c2, 3->0 c2     (tail: σ joins Q, sends c2)
//             r1  F  F  F    all complete: n + log2 n - 2 = 4 rounds
//             r2  F  F  F
#include <algorithm>
#include <string>

#include "stragglar/error.hpp"
#include "synth/stragglar_internal.hpp"

namespace stragglar::detail {

std::vector<Round> stragglar_pow2_rounds(int n, int pipeline) {
  std::vector<Round> rounds;
  stragglar_pow2_rounds(n, pipeline, [&](Round& r) { rounds.push_back(std::move(r)); });
  return rounds;
}

void stragglar_pow2_rounds(int n, int pipeline, const RoundFn& emit) {
  const int m = n - 1;
  const int L = ceil_log2(n);
  require(n >= 2 && (1 << L) == n,
          "stragglar_pow2_rounds: n = " + std::to_string(n) + ", expected a power of two >= 2");
  require(pipeline >= 1, "stragglar_pow2_rounds: pipeline = " + std::to_string(pipeline) +
                             ", expected >= 1");
  const int K = pipeline;
  const int sigma = n - 1;
  const int nchunks = K * m;
  const int total_rounds = nchunks + L - 1;

  // active[x]: the one active chunk rank x holds (-1: none yet, only in phase 1).
  std::vector<int> active(m, -1);
  // Next round (> r) in which rank x pairs with σ; nchunks + L when it never does again.
  auto next_pairing = [&](int x, int r) {
    int g = r + 1 + ((x - (r + 1)) % m + m) % m;
    return g < nchunks ? g : nchunks + L;
  };

  Round round;
  RoundSorter sort;
  std::vector<int> received(m);
  std::vector<int> P, Q;
  P.reserve(m);
  Q.reserve(m + 1);
  std::vector<std::vector<int>> by_chunk(L);  // by_chunk[a]: holders of c_{oldest+1+a}
  for (int r = 0; r < total_rounds; ++r) {
    round.clear();
    round.reserve(static_cast<std::size_t>(n));
    const int busy = r < nchunks ? r % m : -1;
    if (busy >= 0) add_straggler_exchange(round, n, r);
    std::fill(received.begin(), received.end(), -1);  // chunk received by x this round, -1 none

    if (r < L) {
      // Phase 1 (Lemma 1). Rule 1: rank r-1 → rank r-1+L with c_{r-1}.
      if (r >= 1) {
        round.push_back({r - 1, r - 1 + L, {r - 1}, TransferOp::copy});
        received[r - 1 + L] = r - 1;
      }
      // Rule 2: every other holder sends to a chunk-free rank g > 2(L-1).
      int g = 2 * (L - 1) + 1;
      for (int x = 0; x < m; ++x) {
        if (x == busy || x == r - 1 || active[x] < 0) continue;
        while (g < m && (active[g] >= 0 || received[g] >= 0)) ++g;
        if (g >= m) throw Error(ErrorCode::Internal, "stragglar_pow2_rounds: phase 1 ran out of receivers");
        round.push_back({x, g, {active[x]}, TransferOp::copy});
        received[g] = active[x];
      }
    } else {
      // Phase 2 (Lemma 2) and tail (Remark 1).
      const int oldest = r - L;
      // P in order of next pairing with σ (rank r+1 first, then r+2, ...; ranks that never
      // pair again last), Q in order of its chunk (bucketed by age).
      P.clear();
      Q.clear();
      for (auto& bucket : by_chunk) bucket.clear();
      for (int i = 0; i < m; ++i) {
        const int x = (r + 1 + i) % m;
        if (x == busy) continue;
        const int age = active[x] - oldest;  // 0 = oldest, L-1 = became full last round
        if (age < 0 || age >= L)
          throw Error(ErrorCode::Internal, "stragglar_pow2_rounds: invariant broken at rank " +
                                               std::to_string(x) + " in round " + std::to_string(r));
        if (age == 0) P.push_back(x);
        else by_chunk[age - 1].push_back(x);
      }
      for (const auto& bucket : by_chunk) Q.insert(Q.end(), bucket.begin(), bucket.end());
      const bool sigma_free = r >= nchunks;
      if (sigma_free) Q.push_back(sigma);  // σ sends only the last chunk (Remark 1), newest
      if (P.size() != Q.size())
        throw Error(ErrorCode::Internal, "stragglar_pow2_rounds: |P| != |Q| in round " + std::to_string(r));
      auto chunk_of = [&](int q) { return q == sigma ? nchunks - 1 : active[q]; };
      // Rank p may only receive c_j with j + L <= (its next pairing): the allowed sets are
      // prefixes of Q, nested in the order of P, so pairing the i-th most constrained p with
      // the i-th oldest q is a perfect matching iff any is (Hall, as in the proof of Lemma 2;
      // the paper's "second-oldest always works"). O(n) per round.
      for (std::size_t i = 0; i < P.size(); ++i) {
        const int p = P[i], q = Q[i];
        if (chunk_of(q) + L > next_pairing(p, r))
          throw Error(ErrorCode::Internal, "stragglar_pow2_rounds: no partner for rank " +
                                               std::to_string(p) + " in round " + std::to_string(r));
        if (q != sigma) round.push_back({p, q, {oldest}, TransferOp::copy});  // σ has it
        round.push_back({q, p, {chunk_of(q)}, TransferOp::copy});
        received[p] = chunk_of(q);
      }
    }
    // Update the active chunks: P members took their partner's chunk, phase-1 receivers
    // their first chunk, the busy rank the chunk it just reduced with σ.
    for (int x = 0; x < m; ++x)
      if (received[x] >= 0) active[x] = received[x];
    if (busy >= 0) active[busy] = r;
    sort(round);
    emit(round);
  }
}

}  // namespace stragglar::detail
