// compile(schedule, rank): this rank's ordered op list (docs/design.md "Plan and executor").
//
// For each round of each phase we keep only the transfers this rank sends or receives, and
// merge each transfer's chunk list into runs of consecutive chunks (ChunkSpan): a run is one
// contiguous element range of the buffer, so it moves as one message.
//
// All transfers of a round read the state from before the round. A rank that receives a
// `copy` of a chunk in the same round as it sends that chunk must not overwrite it before
// the send has read it, so such a receive is `staged` (through scratch) like every reduce.
#include "stragglar/plan.hpp"

#include <algorithm>
#include <span>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

std::vector<ChunkSpan> merge_chunks(std::span<const int> chunks) {
  std::vector<int> sorted(chunks.begin(), chunks.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<ChunkSpan> spans;
  for (int c : sorted) {
    if (!spans.empty() && spans.back().first + spans.back().count == c) {
      ++spans.back().count;
    } else {
      spans.push_back({c, 1});
    }
  }
  return spans;
}

bool overlaps(const std::vector<ChunkSpan>& a, const std::vector<ChunkSpan>& b) {
  for (const ChunkSpan& x : a)
    for (const ChunkSpan& y : b)
      if (x.first < y.first + y.count && y.first < x.first + x.count) return true;
  return false;
}

int chunk_total(const std::vector<ChunkSpan>& spans) {
  int total = 0;
  for (const ChunkSpan& s : spans) total += s.count;
  return total;
}

}  // namespace

Plan compile(const Schedule& s, int rank) {
  require(s.nranks >= 1, "compile: schedule has nranks = " + std::to_string(s.nranks) +
                             ", expected at least 1");
  require(rank >= 0 && rank < s.nranks,
          "compile: rank " + std::to_string(rank) + " is outside [0, " +
              std::to_string(s.nranks) + ")");
  require(s.nchunks >= 1, "compile: schedule has nchunks = " + std::to_string(s.nchunks) +
                              ", expected at least 1");
  Plan plan;
  plan.rank = rank;
  plan.nranks = s.nranks;
  plan.nchunks = s.nchunks;
  for (std::size_t p = 0; p < s.phases.size(); ++p) {
    const Phase& phase = s.phases[p];
    plan.phase_names.push_back(phase.name);
    for (std::size_t r = 0; r < phase.rounds.size(); ++r) {
      PlanRound pr;
      pr.phase = static_cast<int>(p);
      pr.round = static_cast<int>(r);
      pr.waits_for_straggler = phase.waits_for_straggler;
      for (const Transfer& t : phase.rounds[r]) {
        if (t.src == t.dst) continue;  // a no-op; the verifier rejects it anyway
        if (t.src == rank) pr.sends.push_back({t.dst, merge_chunks(t.chunks), t.op, false});
        if (t.dst == rank) pr.recvs.push_back({t.src, merge_chunks(t.chunks), t.op, true});
      }
      if (pr.sends.empty() && pr.recvs.empty()) continue;
      int staged_chunks = 0;
      for (PeerOp& recv : pr.recvs) {
        if (recv.op == TransferOp::copy) {
          recv.staged = false;
          for (const PeerOp& send : pr.sends)
            if (overlaps(recv.spans, send.spans)) recv.staged = true;
        }
        if (recv.staged) staged_chunks += chunk_total(recv.spans);
      }
      plan.max_staged_chunks_per_round = std::max(plan.max_staged_chunks_per_round, staged_chunks);
      plan.rounds.push_back(std::move(pr));
    }
  }
  return plan;
}

}  // namespace stragglar
