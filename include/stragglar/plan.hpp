// compile(schedule, rank) → Plan: this rank's ordered ops (docs/design.md "Plan and executor").
#pragma once
#include <string>
#include <vector>

#include "stragglar/schedule.hpp"

namespace stragglar {

// A run of consecutive chunks: one contiguous element range of the buffer.
struct ChunkSpan {
  int first = 0;
  int count = 0;
  bool operator==(const ChunkSpan&) const = default;
};

// One side of one transfer, seen from this rank.
struct PeerOp {
  int peer = 0;
  std::vector<ChunkSpan> spans;
  TransferOp op = TransferOp::reduce;  // what the receiver does with the data
  // Receives only: the data lands in scratch first (every reduce, and a copy into chunks this
  // rank also sends in the same round), then is reduced/copied into the buffer. Otherwise a
  // copy is received in place.
  bool staged = false;
  bool operator==(const PeerOp&) const = default;
};

// The rounds this rank takes part in, in order. With ports == 1 there is at most one send
// and one receive per round; with kAllPorts there may be several of each.
struct PlanRound {
  int phase = 0;
  int round = 0;           // index inside the phase
  bool waits_for_straggler = true;
  std::vector<PeerOp> sends;
  std::vector<PeerOp> recvs;
};

struct Plan {
  int rank = 0;
  int nranks = 0;
  int nchunks = 0;
  std::vector<std::string> phase_names;  // indexed by PlanRound::phase, for messages
  std::vector<PlanRound> rounds;
  // Largest number of chunks this rank receives staged (through scratch) in one round: the
  // scratch it needs is this many chunks of ceil(count / nchunks) elements.
  int max_staged_chunks_per_round = 0;
};

// Throws Error(InvalidUsage) for a rank outside [0, nranks). Does not verify the schedule.
Plan compile(const Schedule& s, int rank);

}  // namespace stragglar
