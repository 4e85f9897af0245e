#include "schedule/packed_schedule.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "stragglar/error.hpp"

namespace stragglar::detail {

void PackedSchedule::unpack_round(std::size_t r, Round& out, const std::vector<int>* perm) const {
  out.clear();
  const std::size_t b = round_begin_[r], e = round_begin_[r + 1];
  out.reserve(e - b);
  int one = 0;
  for (std::size_t t = b; t < e; ++t) {
    const std::span<const int> cs = chunks(t, one);
    Transfer& x = out.emplace_back();
    x.src = perm ? (*perm)[src_[t]] : src_[t];
    x.dst = perm ? (*perm)[dst_[t]] : dst_[t];
    x.chunks = ChunkList(cs.begin(), cs.end());
    x.op = op(t);
  }
}

void PackedSchedule::emit(ScheduleSink& out, const std::vector<int>* perm) const {
  ScheduleHeader h = header_;
  if (perm) {
    require(static_cast<int>(perm->size()) == h.nranks,
            "PackedSchedule::emit: permutation has " + std::to_string(perm->size()) + " entries, expected nranks = " +
                std::to_string(h.nranks));
    if (h.straggler) h.straggler = (*perm)[static_cast<std::size_t>(*h.straggler)];
    for (int& r : h.stragglers) r = (*perm)[static_cast<std::size_t>(r)];
    std::sort(h.stragglers.begin(), h.stragglers.end());
  }
  out.begin(h);
  Round round;
  for (const PhaseInfo& phase : phases_) {
    out.begin_phase(phase.name, phase.waits_for_straggler);
    for (std::size_t r = phase.first_round; r < phase.end_round; ++r) {
      unpack_round(r, round, perm);
      out.add_round(round);
    }
  }
  out.end();
}

std::size_t PackedSchedule::memory_bytes() const {
  std::size_t bytes = round_begin_.capacity() * sizeof(std::size_t) + src_.memory_bytes() + dst_.memory_bytes() +
                      ref_.memory_bytes() + pool_.capacity() * 4;
  for (const PhaseInfo& p : phases_) bytes += sizeof(PhaseInfo) + p.name.capacity();
  return bytes;
}

void PackedScheduleBuilder::begin(const ScheduleHeader& header) {
  if (header.nranks < 0 || header.nranks > kMaxPackedRanks)
    throw Error(ErrorCode::InvalidSchedule, "nranks = " + std::to_string(header.nranks) +
                                                ", expected at most " + std::to_string(kMaxPackedRanks) +
                                                " (the packed form stores ranks in 16 bits)");
  p_ = PackedSchedule{};
  p_.header_ = header;
  begun_ = true;
}

void PackedScheduleBuilder::begin_phase(const std::string& name, bool waits_for_straggler) {
  if (!p_.phases_.empty()) p_.phases_.back().end_round = p_.nrounds();
  p_.phases_.push_back(PackedSchedule::PhaseInfo{name, waits_for_straggler, p_.nrounds(), p_.nrounds()});
}

void PackedScheduleBuilder::add_transfer(int src, int dst, std::span<const int> chunks, TransferOp op) {
  const int n = p_.header_.nranks;
  if (src < 0 || src >= n || dst < 0 || dst >= n)
    throw Error(ErrorCode::InvalidSchedule, "transfer " + std::to_string(src) + "->" + std::to_string(dst) +
                                                ": rank out of range [0, " + std::to_string(n) + ")");
  for (int c : chunks)
    if (c < 0 || static_cast<std::uint32_t>(c) > PackedSchedule::kValueMask)
      throw Error(ErrorCode::InvalidSchedule, "transfer " + std::to_string(src) + "->" + std::to_string(dst) +
                                                  ": chunk " + std::to_string(c) + " out of range [0, 2^30)");
  std::uint32_t ref = op == TransferOp::copy ? PackedSchedule::kCopyBit : 0;
  if (chunks.size() == 1) {
    ref |= static_cast<std::uint32_t>(chunks[0]);
  } else {  // also an empty list: the verifier reports it
    const std::size_t at = p_.pool_.size();
    if (at + chunks.size() + 1 > PackedSchedule::kValueMask)
      throw Error(ErrorCode::InvalidSchedule, "schedule has more than 2^30 chunk indices in lists of several");
    p_.pool_.push_back(static_cast<std::int32_t>(chunks.size()));
    p_.pool_.insert(p_.pool_.end(), chunks.begin(), chunks.end());
    ref |= PackedSchedule::kPoolBit | static_cast<std::uint32_t>(at);
  }
  p_.src_.push_back(static_cast<std::uint16_t>(src));
  p_.dst_.push_back(static_cast<std::uint16_t>(dst));
  p_.ref_.push_back(ref);
}

void PackedScheduleBuilder::end_round() { p_.round_begin_.push_back(p_.src_.size()); }

void PackedScheduleBuilder::add_round(Round& round) {
  if (p_.phases_.empty()) throw Error(ErrorCode::Internal, "PackedScheduleBuilder: a round before any phase");
  for (const Transfer& t : round) add_transfer(t.src, t.dst, t.chunks, t.op);
  end_round();
}

void PackedScheduleBuilder::end() {
  if (!p_.phases_.empty()) p_.phases_.back().end_round = p_.nrounds();
}

PackedSchedule PackedScheduleBuilder::take() {
  if (!begun_) throw Error(ErrorCode::Internal, "PackedScheduleBuilder::take before begin");
  end();
  begun_ = false;
  return std::move(p_);
}

PackedSchedule pack(const Schedule& s) {
  PackedScheduleBuilder b;
  b.begin(ScheduleHeader{s.algorithm, s.nranks, s.straggler, s.nchunks, s.ports, s.stragglers});
  for (const Phase& phase : s.phases) {
    b.begin_phase(phase.name, phase.waits_for_straggler);
    for (const Round& round : phase.rounds) {
      for (const Transfer& t : round) b.add_transfer(t.src, t.dst, t.chunks, t.op);
      b.end_round();
    }
  }
  return b.take();
}

}  // namespace stragglar::detail
