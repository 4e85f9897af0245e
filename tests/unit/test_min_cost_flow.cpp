// The deadline builder's min-cost flow (src/synth/min_cost_flow.hpp) on small graphs whose
// optimum is known: by hand, and by brute force over every matching of random bipartite graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "schedule_mutator.hpp"
#include "synth/min_cost_flow.hpp"

namespace stragglar::detail {
namespace {

// Total cost and flow out of the source of a solved network.
struct Solution {
  long long cost = 0;
  int flow = 0;
};
Solution solution(const MinCostFlow& f, int nodes, int s) {
  Solution out;
  for (int u = 0; u < nodes; ++u)
    for (int p = f.begin(u); p < f.end(u); ++p)
      if (f.forward(p)) {
        out.cost += static_cast<long long>(f.flow_on(p)) * f.cost(p);
        if (u == s) out.flow += f.flow_on(p);
      }
  return out;
}

// The best weight of any matching (not necessarily perfect): senders in order, each matched to an
// unused receiver or to none.
long long best_matching(const std::vector<std::vector<int>>& w, std::size_t i, std::vector<char>& used) {
  if (i == w.size()) return 0;
  long long best = best_matching(w, i + 1, used);
  for (std::size_t j = 0; j < used.size(); ++j)
    if (!used[j] && w[i][j] > 0) {
      used[j] = 1;
      best = std::max(best, w[i][j] + best_matching(w, i + 1, used));
      used[j] = 0;
    }
  return best;
}

TEST(MinCostFlow, MaximumWeightMatchingsOfRandomBipartiteGraphs) {
  testing::Rng rng(5);
  MinCostFlow f;  // reused, as the builder reuses it round after round
  for (int trial = 0; trial < 300; ++trial) {
    const int a = rng.range(1, 5), b = rng.range(1, 5);
    std::vector<std::vector<int>> w(static_cast<std::size_t>(a), std::vector<int>(static_cast<std::size_t>(b), 0));
    // Nodes: 0 source, 1..a senders, then b receivers (unit nodes: one arc to t, added last), t.
    const int r0 = 1 + a, t = r0 + b, nodes = t + 1;
    f.reset(nodes);
    for (int i = 0; i < a; ++i) f.add(0, 1 + i, 1, 0);
    for (int i = 0; i < a; ++i)
      for (int j = 0; j < b; ++j)
        if (rng.chance(70)) {
          w[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] = rng.range(1, 30);
          f.add(1 + i, r0 + j, 1, -w[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)]);
        }
    for (int j = 0; j < b; ++j) f.add(r0 + j, t, 1, 0);
    f.run(0, t, r0, t);
    std::vector<char> used(static_cast<std::size_t>(b), 0);
    EXPECT_EQ(-solution(f, nodes, 0).cost, best_matching(w, 0, used)) << "trial " << trial;
  }
}

// The builder's shape: a chunk node whose capacity is split into tiers of different worth.
TEST(MinCostFlow, TieredArcsAreFilledBestFirst) {
  MinCostFlow f;
  // 0 source, 1 sender, 2 chunk in, 3 chunk out, 4..7 receivers, 8 sink.
  f.reset(9);
  f.add(0, 1, 3, 0);
  f.add(1, 2, 3, 0);
  f.add(2, 3, 2, -10);  // the first two deliveries are worth 10 more
  f.add(2, 3, 5, 0);
  const int weight[] = {5, 4, 3, 1};
  for (int i = 0; i < 4; ++i) f.add(3, 4 + i, 1, -weight[i]);
  for (int i = 0; i < 4; ++i) f.add(4 + i, 8, 1, 0);
  f.run(0, 8, 4, 8);
  const Solution s = solution(f, 9, 0);
  EXPECT_EQ(s.flow, 3);           // the sender's capacity
  EXPECT_EQ(s.cost, -(20 + 12));  // both tiers of 10, receivers 5 + 4 + 3
}

TEST(MinCostFlow, StopsWhereMoreFlowWouldCostMore) {
  MinCostFlow f;
  f.reset(4);
  f.add(0, 1, 1, 0);
  f.add(1, 2, 1, 5);  // a path of positive cost: no flow
  f.add(2, 3, 1, 0);
  f.run(0, 3, 2, 3);
  EXPECT_EQ(solution(f, 4, 0).flow, 0);
  // With a profitable path beside it, only that one carries flow.
  f.reset(5);
  f.add(0, 1, 2, 0);
  f.add(1, 2, 1, 5);
  f.add(1, 3, 1, -2);
  f.add(2, 4, 1, 0);
  f.add(3, 4, 1, 0);
  f.run(0, 4, 2, 4);
  const Solution s = solution(f, 5, 0);
  EXPECT_EQ(s.flow, 1);
  EXPECT_EQ(s.cost, -2);
}

}  // namespace
}  // namespace stragglar::detail
