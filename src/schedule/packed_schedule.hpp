// PackedSchedule: a schedule in ~8 bytes per transfer (internal, not installed).
//
// A Schedule spends 48 bytes on a transfer (two ints, a ChunkList, the op): 1.6 GB for the
// 33.5 million transfers of StragglAR at n = 4096. Packed, a transfer is its two ranks as 16-bit
// numbers and one 32-bit word holding the op and either its one chunk (almost every transfer
// carries one) or where its chunk list starts in a shared pool: 268 MB at n = 4096, 17 MB at
// n = 1024. The plan cache keeps the canonical schedule of each (algorithm, n, K) in this form,
// and the CLI reads JSON into it. Arrays, not objects: compiling one rank scans src and dst.
#pragma once
#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "schedule/schedule_sink.hpp"
#include "stragglar/schedule.hpp"

namespace stragglar::detail {

// Ranks are stored in 16 bits.
inline constexpr int kMaxPackedRanks = 1 << 16;

// A growable array in fixed blocks of 2^18 elements: growing never copies (a vector would, with
// the old and the new buffer alive at once: 2-3x the size at the moment it grows), and at most
// one block is partly empty.
template <class T>
class BlockArray {
 public:
  static constexpr std::size_t kShift = 18, kBlock = std::size_t{1} << kShift;
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void push_back(T v) {
    if ((size_ & (kBlock - 1)) == 0) {
      blocks_.emplace_back(new T[kBlock]);
      last_ = blocks_.back().get();
    }
    last_[size_ & (kBlock - 1)] = v;
    ++size_;
  }
  T operator[](std::size_t i) const { return blocks_[i >> kShift][i & (kBlock - 1)]; }
  T back() const { return (*this)[size_ - 1]; }
  // Elements [b * kBlock, min(size, (b + 1) * kBlock)) are contiguous.
  std::size_t nblocks() const { return blocks_.size(); }
  const T* block(std::size_t b) const { return blocks_[b].get(); }
  std::size_t block_size(std::size_t b) const { return std::min(kBlock, size_ - b * kBlock); }
  std::size_t memory_bytes() const { return blocks_.size() * kBlock * sizeof(T); }

 private:
  std::vector<std::unique_ptr<T[]>> blocks_;
  T* last_ = nullptr;
  std::size_t size_ = 0;
};

class PackedSchedule {
 public:
  struct PhaseInfo {
    std::string name;
    bool waits_for_straggler = true;
    std::size_t first_round = 0;  // rounds [first_round, end_round) of the whole schedule
    std::size_t end_round = 0;
  };

  const ScheduleHeader& header() const { return header_; }
  const std::vector<PhaseInfo>& phases() const { return phases_; }
  std::size_t nrounds() const { return round_begin_.size() - 1; }
  std::size_t ntransfers() const { return src_.size(); }
  // Transfers [round_begin(r), round_begin(r + 1)) form round r (counted over all phases).
  std::size_t round_begin(std::size_t r) const { return round_begin_[r]; }

  int src(std::size_t t) const { return src_[t]; }
  int dst(std::size_t t) const { return dst_[t]; }
  TransferOp op(std::size_t t) const { return (ref_[t] & kCopyBit) ? TransferOp::copy : TransferOp::reduce; }
  // The chunks of transfer t; `one` holds the chunk of a one-chunk transfer (the span points to it).
  std::span<const int> chunks(std::size_t t, int& one) const {
    const std::uint32_t ref = ref_[t];
    if (!(ref & kPoolBit)) {
      one = static_cast<int>(ref & kValueMask);
      return {&one, 1};
    }
    const std::size_t at = ref & kValueMask;
    return {pool_.data() + at + 1, static_cast<std::size_t>(pool_[at])};  // lists of several: rare
  }
  // f(t, src, dst, op, chunks) for the transfers t in [b, e), in order, until f returns false;
  // returns false when stopped. The fast way through many transfers (block by block).
  template <class F>
  bool visit(std::size_t b, std::size_t e, F&& f) const {
    int one = 0;
    while (b < e) {
      const std::size_t blk = b >> BlockArray<std::uint16_t>::kShift;
      const std::size_t off = b & (BlockArray<std::uint16_t>::kBlock - 1);
      const std::size_t len = std::min(e - b, BlockArray<std::uint16_t>::kBlock - off);
      const std::uint16_t* s = src_.block(blk) + off;
      const std::uint16_t* d = dst_.block(blk) + off;
      const std::uint32_t* x = ref_.block(blk) + off;
      for (std::size_t i = 0; i < len; ++i) {
        const std::uint32_t ref = x[i];
        std::span<const int> cs;
        if (!(ref & kPoolBit)) {
          one = static_cast<int>(ref & kValueMask);
          cs = {&one, 1};
        } else {
          const std::size_t at = ref & kValueMask;
          cs = {pool_.data() + at + 1, static_cast<std::size_t>(pool_[at])};
        }
        if (!f(b + i, static_cast<int>(s[i]), static_cast<int>(d[i]),
               (ref & kCopyBit) ? TransferOp::copy : TransferOp::reduce, cs))
          return false;
      }
      b += len;
    }
    return true;
  }
  // f(t) for every transfer t that rank q sends or receives, in order: a scan of the two rank
  // arrays, 16 at a time (vectorized), ~10 ms for the 33.5 million transfers of n = 4096.
  // Whether r is among s[0..16) or d[0..16), 16 lanes at a time (GCC/Clang vector extension:
  // the plain loop is not vectorized once inlined into the scan).
  static bool any_of_16(const std::uint16_t* s, const std::uint16_t* d, std::uint16_t r) {
    using Lanes = std::uint16_t __attribute__((vector_size(16)));  // 8 lanes: SSE2, any x86-64
    Lanes s0, s1, d0, d1;
    std::memcpy(&s0, s, 16);
    std::memcpy(&s1, s + 8, 16);
    std::memcpy(&d0, d, 16);
    std::memcpy(&d1, d + 8, 16);
    const Lanes hit = (s0 == r) | (s1 == r) | (d0 == r) | (d1 == r);
    std::uint64_t w[2];
    std::memcpy(w, &hit, sizeof w);
    return (w[0] | w[1]) != 0;
  }
  template <class F>
  void for_each_of_rank(int q, F&& f) const {
    const auto r = static_cast<std::uint16_t>(q);
    for (std::size_t blk = 0; blk < src_.nblocks(); ++blk) {
      const std::uint16_t* s = src_.block(blk);
      const std::uint16_t* d = dst_.block(blk);
      const std::size_t len = src_.block_size(blk), base = blk * BlockArray<std::uint16_t>::kBlock;
      std::size_t i = 0;
      for (; i + 16 <= len; i += 16) {
        if (!any_of_16(s + i, d + i, r)) continue;
        for (std::size_t j = 0; j < 16; ++j)
          if (s[i + j] == r || d[i + j] == r) f(base + i + j);
      }
      for (; i < len; ++i)
        if (s[i] == r || d[i] == r) f(base + i);
    }
  }

  // Round r as Transfers, ranks renamed through perm when given (rank x becomes (*perm)[x]).
  void unpack_round(std::size_t r, Round& out, const std::vector<int>* perm = nullptr) const;
  // The whole schedule to a sink (e.g. a ScheduleCollector, a JSON writer), renamed likewise.
  void emit(ScheduleSink& out, const std::vector<int>* perm = nullptr) const;
  // Heap bytes held.
  std::size_t memory_bytes() const;

 private:
  friend class PackedScheduleBuilder;
  static constexpr std::uint32_t kCopyBit = 1U << 31;
  static constexpr std::uint32_t kPoolBit = 1U << 30;
  static constexpr std::uint32_t kValueMask = kPoolBit - 1;

  ScheduleHeader header_;
  std::vector<PhaseInfo> phases_;
  std::vector<std::size_t> round_begin_{0};
  BlockArray<std::uint16_t> src_, dst_;
  BlockArray<std::uint32_t> ref_;  // op bit, pool bit, then the chunk or the pool position
  std::vector<std::int32_t> pool_;  // chunk lists of more than one chunk: count, chunks...
};

// A sink that packs. Throws Error(InvalidSchedule) for what the packed form cannot hold: nranks
// above kMaxPackedRanks, a rank outside [0, nranks), a chunk outside [0, 2^30), more than 2^30
// pooled chunk indices.
class PackedScheduleBuilder final : public ScheduleSink {
 public:
  void begin(const ScheduleHeader& header) override;
  void begin_phase(const std::string& name, bool waits_for_straggler) override;
  void add_round(Round& round) override;
  void end() override;
  // One transfer of the current round (a round ends at end_round()); for readers that see one
  // transfer at a time and need no Round.
  void add_transfer(int src, int dst, std::span<const int> chunks, TransferOp op);
  void end_round();
  PackedSchedule take();

 private:
  PackedSchedule p_;
  bool begun_ = false;
};

// Packs a Schedule (e.g. one read from JSON or synthesized whole).
PackedSchedule pack(const Schedule& s);

}  // namespace stragglar::detail
