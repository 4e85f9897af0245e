// The generic executor (docs/runtime.md "Executor"): one code path for every schedule.
//
// A round, seen from this rank (at most one send and one receive in the single-port model):
//
//     recv (peer, spans) ──► scratch ──► device.reduce(buf[span], scratch)   op == reduce
//     recv (peer, spans) ──► buf[span]                                       op == copy
//     send (peer, spans) ◄── buf[span]
//
// posted together, then one wait (Transport::exchange). Reading the send data and receiving
// into scratch in the same round is what makes "all transfers of a round read the state from
// before the round" hold. Chunk c covers chunk_range(count, nchunks, c): any count works
// without padding; empty chunks (count < nchunks) move no message at all, on both sides.
#include "runtime/executor.hpp"

#include <algorithm>
#include <cstdint>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

constexpr std::size_t kStageAlign = 16;  // the widest vector load of the reducers (CUDA int4)

ElementRange span_range(std::size_t count, int nchunks, const ChunkSpan& s) {
  const ElementRange first = chunk_range(count, nchunks, s.first);
  const ElementRange last = chunk_range(count, nchunks, s.first + s.count - 1);
  return {first.begin, last.end};
}

bool selected(PhaseSelection sel, bool waits_for_straggler) {
  switch (sel) {
    case PhaseSelection::all: return true;
    case PhaseSelection::no_wait_only: return !waits_for_straggler;
    case PhaseSelection::waiting_only: return waits_for_straggler;
  }
  return true;
}

}  // namespace

std::size_t Executor::scratch_bytes(const Plan& plan, std::size_t count, DataType t) {
  if (plan.nchunks <= 0 || count == 0) return 0;
  const std::size_t n = static_cast<std::size_t>(plan.nchunks);
  const std::size_t max_chunk = (count + n - 1) / n;
  // + kStageAlign·2 per staged span: each slot starts at its destination's address modulo
  // kStageAlign, so vectorised reduce kernels see equally aligned operands.
  return static_cast<std::size_t>(plan.max_staged_chunks_per_round) * (max_chunk * size_of(t) + 2 * kStageAlign);
}

void Executor::run(const Plan& plan, void* buf, std::size_t count, DataType t, ReduceOp op,
                   void* scratch, std::size_t scratch_size, PhaseSelection phases) {
  if (count == 0) return;
  if (const std::size_t need = scratch_bytes(plan, count, t); scratch_size < need)  // no string unless it fails
    throw Error(ErrorCode::Internal, "Executor::run: scratch of " + std::to_string(scratch_size) +
                                         " bytes, expected at least " + std::to_string(need));
  const std::size_t es = size_of(t);
  auto* const base = static_cast<std::byte*>(buf);
  auto* const scratch_base = static_cast<std::byte*>(scratch);

  for (const PlanRound& round : plan.rounds) {
    if (!selected(phases, round.waits_for_straggler)) continue;
    sends_.clear();
    recvs_.clear();
    staged_.clear();
    for (const PeerOp& send : round.sends) {
      for (const ChunkSpan& span : send.spans) {
        const ElementRange r = span_range(count, plan.nchunks, span);
        if (r.size() == 0) continue;
        sends_.push_back({send.peer, base + r.begin * es, r.size() * es});
      }
    }
    std::size_t scratch_off = 0;
    for (const PeerOp& recv : round.recvs) {
      for (const ChunkSpan& span : recv.spans) {
        const ElementRange r = span_range(count, plan.nchunks, span);
        if (r.size() == 0) continue;
        std::byte* dst = base + r.begin * es;
        if (recv.staged) {
          // Same address modulo kStageAlign as dst (scratch itself is kStageAlign-aligned).
          scratch_off = (scratch_off + kStageAlign - 1) / kStageAlign * kStageAlign +
                        reinterpret_cast<std::uintptr_t>(dst) % kStageAlign;
          std::byte* tmp = scratch_base + scratch_off;
          scratch_off += r.size() * es;
          recvs_.push_back({recv.peer, tmp, r.size() * es});
          staged_.push_back({dst, tmp, r.size(), recv.op});
        } else {
          recvs_.push_back({recv.peer, dst, r.size() * es});
        }
      }
    }
    try {
      transport_.exchange(sends_, recvs_);
      for (const StagedRecv& s : staged_) {
        if (s.op == TransferOp::reduce)
          device_.reduce(s.dst, s.src, s.count, t, op);
        else
          device_.copy(s.dst, s.src, s.count * es);
      }
    } catch (const Error& e) {
      const std::string& name = static_cast<std::size_t>(round.phase) < plan.phase_names.size()
                                    ? plan.phase_names[static_cast<std::size_t>(round.phase)]
                                    : std::to_string(round.phase);
      throw Error(e.code(), "phase '" + name + "' round " + std::to_string(round.round) +
                                " (rank " + std::to_string(plan.rank) + " of " +
                                std::to_string(plan.nranks) + "): " + e.what());
    }
  }
  if (op == ReduceOp::avg && phases != PhaseSelection::no_wait_only)
    device_.finish_average(buf, count, t, plan.nranks);
}

}  // namespace stragglar
