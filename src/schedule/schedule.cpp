#include "stragglar/schedule.hpp"

#include <algorithm>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar {

const char* to_string(TransferOp op) noexcept {
  return op == TransferOp::reduce ? "reduce" : "copy";
}

std::vector<int> Schedule::late_ranks() const {
  if (!stragglers.empty()) return stragglers;
  if (straggler) return {*straggler};
  return {};
}

int Schedule::total_rounds() const {
  int total = 0;
  for (const Phase& p : phases) total += static_cast<int>(p.rounds.size());
  return total;
}

int Schedule::waiting_rounds() const {
  int total = 0;
  for (const Phase& p : phases)
    if (p.waits_for_straggler) total += static_cast<int>(p.rounds.size());
  return total;
}

ElementRange chunk_range(std::size_t count, int nchunks, int chunk) {
  // On the executor's hot path: the messages are built only when a check fails.
  if (nchunks <= 0) throw Error(ErrorCode::InvalidUsage, "chunk_range: nchunks = " + std::to_string(nchunks) + ", expected > 0");
  if (chunk < 0 || chunk >= nchunks)
    throw Error(ErrorCode::InvalidUsage, "chunk_range: chunk " + std::to_string(chunk) + " out of range [0, " +
                                             std::to_string(nchunks) + ")");
  const std::size_t n = static_cast<std::size_t>(nchunks);
  const std::size_t c = static_cast<std::size_t>(chunk);
  const std::size_t base = count / n;
  const std::size_t extra = count % n;  // the first `extra` chunks get one element more
  const std::size_t begin = c * base + (c < extra ? c : extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

Schedule relabel(Schedule s, const std::vector<int>& perm) {
  require(static_cast<int>(perm.size()) == s.nranks,
          "relabel: permutation has " + std::to_string(perm.size()) + " entries, expected nranks = " +
              std::to_string(s.nranks));
  std::vector<bool> seen(perm.size(), false);
  for (int p : perm) {
    require(p >= 0 && p < s.nranks && !seen[p],
            "relabel: entry " + std::to_string(p) + " is not a permutation of [0, " +
                std::to_string(s.nranks) + ")");
    seen[p] = true;
  }
  auto in_range = [&](int r, const char* what) {
    if (r < 0 || r >= s.nranks)  // message built only on failure: this runs per transfer
      require(false, std::string("relabel: ") + what + " " + std::to_string(r) + " out of range, expected 0.." +
                         std::to_string(s.nranks - 1));
  };
  if (s.straggler) in_range(*s.straggler, "straggler");
  for (int r : s.stragglers) in_range(r, "straggler");
  for (const Phase& phase : s.phases)
    for (const Round& round : phase.rounds)
      for (const Transfer& t : round) {
        in_range(t.src, "src");
        in_range(t.dst, "dst");
      }
  if (s.straggler) s.straggler = perm[*s.straggler];
  for (int& r : s.stragglers) r = perm[r];
  std::sort(s.stragglers.begin(), s.stragglers.end());
  for (Phase& phase : s.phases)
    for (Round& round : phase.rounds)
      for (Transfer& t : round) {
        t.src = perm[t.src];
        t.dst = perm[t.dst];
      }
  return s;
}

}  // namespace stragglar
