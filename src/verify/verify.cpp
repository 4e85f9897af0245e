// Exact symbolic execution of a schedule (docs/design.md "Verifier"; docs/verification.md).
//
// Semantics (unchanged): for every (rank, chunk) the set of ranks whose contributions it holds,
// initially {rank}. All transfers of a round read the state from before the round; a copy
// replaces the destination's set, a reduce adds the source's set and must not overlap it
// (double counting); a (rank, chunk) written twice in one round is an error when one of the
// writes is a copy. At the end every set must hold all n ranks. Ranks, chunks, ports and the
// straggler rule of each phase are checked per transfer, and the first violation in schedule
// order is reported.
//
// How, so that n = 4096 (33.5 million transfers) verifies in a fraction of a second and in
// O(n²) bits of set state:
//   1. One pass in schedule order checks everything that needs no sets (ranks, ports, the
//      straggler rule, chunk ranges and order), adds up the β cost, and appends each transfer to
//      the list of each of its chunks (4 bytes: src, dst, op, "first of a new round").
//   2. The chunks are independent: each is simulated alone, with one set per rank — n sets of
//      n bits at most, reused from chunk to chunk. A set is a pair of rank intervals held in
//      the 8-byte handle itself (what every synthesized schedule produces: ring hops add a
//      neighbour, σ completes a range, copies share), or a bitset with a reference count when
//      a union needs more than two intervals.
//   The earliest error over all chunks is found by one more pass in schedule order, only when
//   there is one.
#include "stragglar/verify.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "schedule/packed_schedule.hpp"
#include "stragglar/error.hpp"
#include "verify/verify_packed.hpp"

namespace stragglar {
namespace {

using detail::PackedSchedule;

// ---- Sources: a Schedule or a PackedSchedule, visited in schedule order ---------------------

struct TransferView {
  int src;
  int dst;
  TransferOp op;
  std::span<const int> chunks;
};

class ScheduleSource {
 public:
  explicit ScheduleSource(const Schedule& s) : s_(s) {}
  int nranks() const { return s_.nranks; }
  int nchunks() const { return s_.nchunks; }
  int ports() const { return s_.ports; }
  std::optional<int> straggler() const { return s_.straggler; }
  const std::vector<int>& stragglers() const { return s_.stragglers; }
  std::size_t nphases() const { return s_.phases.size(); }
  const std::string& phase_name(std::size_t p) const { return s_.phases[p].name; }
  bool phase_waits(std::size_t p) const { return s_.phases[p].waits_for_straggler; }
  std::size_t phase_rounds(std::size_t p) const { return s_.phases[p].rounds.size(); }
  std::size_t round_size(std::size_t p, std::size_t r) const { return s_.phases[p].rounds[r].size(); }
  // f(transfer index in the round, TransferView) → false stops; returns false when stopped.
  template <class F>
  bool visit_round(std::size_t p, std::size_t r, F&& f) const {
    const Round& round = s_.phases[p].rounds[r];
    for (std::size_t ti = 0; ti < round.size(); ++ti) {
      const Transfer& t = round[ti];
      if (!f(ti, TransferView{t.src, t.dst, t.op, t.chunks})) return false;
    }
    return true;
  }

 private:
  const Schedule& s_;
};

class PackedSource {
 public:
  explicit PackedSource(const PackedSchedule& s) : s_(s) {}
  int nranks() const { return s_.header().nranks; }
  int nchunks() const { return s_.header().nchunks; }
  int ports() const { return s_.header().ports; }
  std::optional<int> straggler() const { return s_.header().straggler; }
  const std::vector<int>& stragglers() const { return s_.header().stragglers; }
  std::size_t nphases() const { return s_.phases().size(); }
  const std::string& phase_name(std::size_t p) const { return s_.phases()[p].name; }
  bool phase_waits(std::size_t p) const { return s_.phases()[p].waits_for_straggler; }
  std::size_t phase_rounds(std::size_t p) const { return s_.phases()[p].end_round - s_.phases()[p].first_round; }
  std::size_t round_size(std::size_t p, std::size_t r) const {
    const std::size_t g = s_.phases()[p].first_round + r;
    return s_.round_begin(g + 1) - s_.round_begin(g);
  }
  template <class F>
  bool visit_round(std::size_t p, std::size_t r, F&& f) const {
    const std::size_t g = s_.phases()[p].first_round + r;
    const std::size_t b = s_.round_begin(g);
    return s_.visit(b, s_.round_begin(g + 1), [&](std::size_t t, int src, int dst, TransferOp op, std::span<const int> cs) {
      return f(t - b, TransferView{src, dst, op, cs});
    });
  }

 private:
  const PackedSchedule& s_;
};

// ---- Rank sets -----------------------------------------------------------------------------

// A set of ranks: up to two disjoint, non-adjacent intervals [a1,b1) [a2,b2) packed in 64 bits
// (a2 = b2 = 0: one interval), or a bitset in the arena (a1 = b1 = 0xffff, index + 1 above).
using Handle = std::uint64_t;
constexpr std::uint64_t kArenaTag = 0xffffffffULL;

struct Interval {
  int a, b;
};

bool is_arena(Handle h) { return (h & kArenaTag) == kArenaTag; }
// Index + 1 above, so that every handle with zero upper bits is a single interval.
std::uint32_t arena_index(Handle h) { return static_cast<std::uint32_t>(h >> 32) - 1; }
Handle arena_handle(std::uint32_t i) { return (static_cast<std::uint64_t>(i + 1) << 32) | kArenaTag; }
Handle inline_handle(Interval x, Interval y = {0, 0}) {
  return static_cast<std::uint64_t>(x.a) | static_cast<std::uint64_t>(x.b) << 16 |
         static_cast<std::uint64_t>(y.a) << 32 | static_cast<std::uint64_t>(y.b) << 48;
}
Handle singleton(int r) { return inline_handle({r, r + 1}); }
// The intervals of an inline handle; returns how many (1 or 2).
int intervals(Handle h, Interval out[2]) {
  out[0] = {static_cast<int>(h & 0xffff), static_cast<int>((h >> 16) & 0xffff)};
  out[1] = {static_cast<int>((h >> 32) & 0xffff), static_cast<int>(h >> 48)};
  return out[1].a < out[1].b ? 2 : 1;
}

class RankSets {
 public:
  explicit RankSets(int n) : n_(n), words_((static_cast<std::size_t>(n) + 63) / 64) {}

  void reset() {  // every handle of the previous chunk is dead
    used_ = 0;
    free_.clear();
  }
  int size(Handle h) const {
    if (is_arena(h)) return count_[arena_index(h)];
    Interval iv[2];
    const int k = intervals(h, iv);
    return iv[0].b - iv[0].a + (k == 2 ? iv[1].b - iv[1].a : 0);
  }
  void retain(Handle h) {
    if (is_arena(h)) ++refs_[arena_index(h)];
  }
  void release(Handle h) {
    if (is_arena(h) && --refs_[arena_index(h)] == 0) free_.push_back(arena_index(h));
  }

  bool intersects(Handle x, Handle y) const {
    if (((x | y) >> 32) == 0)  // one interval each: the common case, kept inline
      return (x & 0xffff) < ((y >> 16) & 0xffff) && (y & 0xffff) < ((x >> 16) & 0xffff);
    return intersects_general(x, y);
  }
  // x ∪ y for disjoint x, y (checked by the caller); the result holds one reference.
  Handle unite(Handle x, Handle y) {
    if (((x | y) >> 32) == 0) {  // one interval each
      const Interval p{static_cast<int>(x & 0xffff), static_cast<int>(x >> 16)};
      const Interval q{static_cast<int>(y & 0xffff), static_cast<int>(y >> 16)};
      if (p.b == q.a) return inline_handle({p.a, q.b});
      if (q.b == p.a) return inline_handle({q.a, p.b});
      return p.a < q.a ? inline_handle(p, q) : inline_handle(q, p);
    }
    if (!is_arena(x) && !is_arena(y)) {
      // Merge the two sorted interval lists, joining touching ends (a ring pass that wrapped
      // around: two intervals, one more rank).
      Interval a[2], b[2], all[4];
      const int ka = intervals(x, a), kb = intervals(y, b);
      int m = 0;
      for (int i = 0, j = 0; i < ka || j < kb;) {
        const Interval next = (j >= kb || (i < ka && a[i].a < b[j].a)) ? a[i++] : b[j++];
        if (m > 0 && all[m - 1].b == next.a) all[m - 1].b = next.b;
        else all[m++] = next;
      }
      if (m <= 2) return m == 1 ? inline_handle(all[0]) : inline_handle(all[0], all[1]);
      return to_bitset(all, m, size(x) + size(y));
    }
    return unite_general(x, y);
  }

 private:
  [[gnu::noinline]] bool intersects_general(Handle x, Handle y) const {
    if (!is_arena(x) && !is_arena(y)) {
      Interval p[2], q[2];
      const int kp = intervals(x, p), kq = intervals(y, q);
      for (int i = 0; i < kp; ++i)
        for (int j = 0; j < kq; ++j)
          if (p[i].a < q[j].b && q[j].a < p[i].b) return true;
      return false;
    }
    if (is_arena(x) && is_arena(y)) {
      const std::uint64_t* a = bits(arena_index(x));
      const std::uint64_t* b = bits(arena_index(y));
      std::uint64_t any = 0;
      for (std::size_t w = 0; w < words_; ++w) any |= a[w] & b[w];
      return any != 0;
    }
    if (is_arena(x)) std::swap(x, y);
    Interval iv[2];
    const int k = intervals(x, iv);
    const std::uint64_t* a = bits(arena_index(y));
    for (int i = 0; i < k; ++i)
      if (range_any(a, iv[i])) return true;
    return false;
  }

  [[gnu::noinline]] Handle to_bitset(const Interval* all, int m, int count) {
    const std::uint32_t i = allocate();
    std::uint64_t* out = bits(i);
    std::fill(out, out + words_, 0);
    for (int j = 0; j < m; ++j) set_range(out, all[j]);
    count_[i] = count;
    return arena_handle(i);
  }
  // At least one of x, y is a bitset.
  [[gnu::noinline]] Handle unite_general(Handle x, Handle y) {
    if (is_arena(x) && !is_arena(y)) std::swap(x, y);
    // y is in the arena; x either
    const int total = size(x) + size(y);
    const std::uint32_t i = allocate();
    std::uint64_t* out = bits(i);
    const std::uint64_t* b = bits(arena_index(y));
    if (is_arena(x)) {
      const std::uint64_t* a = bits(arena_index(x));
      for (std::size_t w = 0; w < words_; ++w) out[w] = a[w] | b[w];
    } else {
      std::copy(b, b + words_, out);
      Interval iv[2];
      const int k = intervals(x, iv);
      for (int j = 0; j < k; ++j) set_range(out, iv[j]);
    }
    count_[i] = total;
    return arena_handle(i);
  }


 public:
  // The members, for messages.
  std::vector<bool> members(Handle h) const {
    std::vector<bool> in(static_cast<std::size_t>(n_), false);
    if (is_arena(h)) {
      const std::uint64_t* a = bits(arena_index(h));
      for (int r = 0; r < n_; ++r) in[static_cast<std::size_t>(r)] = (a[r / 64] >> (r % 64)) & 1U;
    } else {
      Interval iv[2];
      const int k = intervals(h, iv);
      for (int j = 0; j < k; ++j)
        for (int r = iv[j].a; r < iv[j].b; ++r) in[static_cast<std::size_t>(r)] = true;
    }
    return in;
  }

 private:
  std::uint64_t* bits(std::uint32_t i) { return bits_.data() + static_cast<std::size_t>(i) * words_; }
  const std::uint64_t* bits(std::uint32_t i) const { return bits_.data() + static_cast<std::size_t>(i) * words_; }
  std::uint32_t allocate() {
    std::uint32_t i;
    if (!free_.empty()) {
      i = free_.back();
      free_.pop_back();
    } else {
      i = used_++;
      if (i >= count_.size()) {
        count_.resize(i + 1);
        refs_.resize(i + 1);
        bits_.resize(static_cast<std::size_t>(i + 1) * words_);
      }
    }
    refs_[i] = 1;
    return i;
  }
  static void set_range(std::uint64_t* w, Interval iv) {
    for (int r = iv.a; r < iv.b;) {
      const int bit = r % 64;
      const int take = std::min(64 - bit, iv.b - r);
      const std::uint64_t mask = take == 64 ? ~0ULL : ((1ULL << take) - 1) << bit;
      w[r / 64] |= mask;
      r += take;
    }
  }
  static bool range_any(const std::uint64_t* w, Interval iv) {
    for (int r = iv.a; r < iv.b;) {
      const int bit = r % 64;
      const int take = std::min(64 - bit, iv.b - r);
      const std::uint64_t mask = take == 64 ? ~0ULL : ((1ULL << take) - 1) << bit;
      if (w[r / 64] & mask) return true;
      r += take;
    }
    return false;
  }

  int n_;
  std::size_t words_;
  std::vector<std::uint64_t> bits_;
  std::vector<int> count_, refs_;
  std::vector<std::uint32_t> free_;
  std::uint32_t used_ = 0;
};

// "{0,1,5}" — listing at most a few members keeps messages readable at n = 4096.
std::string describe(const std::vector<bool>& in, bool complement = false) {
  std::string out = "{";
  int listed = 0, total = 0;
  for (std::size_t r = 0; r < in.size(); ++r) {
    if (in[r] == complement) continue;
    ++total;
    if (listed < 8) {
      if (listed++) out += ',';
      out += std::to_string(r);
    }
  }
  if (total > listed) out += ",... (" + std::to_string(total) + " ranks)";
  return out + "}";
}

std::string chunk_list(std::span<const int> chunks) {
  std::string s = "[";
  for (std::size_t i = 0; i < chunks.size() && i < 8; ++i) {
    if (i) s += ',';
    s += std::to_string(chunks[i]);
  }
  if (chunks.size() > 8) s += ",...";
  return s + "]";
}

// ---- One chunk's transfers, 4 bytes each -----------------------------------------------------

constexpr std::uint32_t kEntryCopy = 1U << 15;
constexpr std::uint32_t kEntryNewRound = 1U << 31;
std::uint32_t entry(int src, int dst, TransferOp op, bool new_round) {
  return static_cast<std::uint32_t>(src) | (op == TransferOp::copy ? kEntryCopy : 0) |
         static_cast<std::uint32_t>(dst) << 16 | (new_round ? kEntryNewRound : 0);
}
int entry_src(std::uint32_t e) { return static_cast<int>(e & 0x7fff); }
int entry_dst(std::uint32_t e) { return static_cast<int>((e >> 16) & 0x7fff); }
bool entry_copy(std::uint32_t e) { return (e & kEntryCopy) != 0; }
bool entry_new_round(std::uint32_t e) { return (e & kEntryNewRound) != 0; }

constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();

// What went wrong in a chunk, for the message.
struct ChunkFault {
  bool copy_conflict = false;  // else double counting
  int dst = 0;
  std::vector<bool> overlap;
};

// Each chunk's entries in schedule order, appended while the schedule is read once: blocks that
// grow from 16 to 1024 entries per chunk (a header may promise 2^24 chunks and touch a few),
// carved from 1 MB slabs.
class ChunkEntries {
 public:
  void resize(std::size_t ids) { lists_.resize(ids); }
  std::size_t ids() const { return lists_.size(); }
  void push(std::size_t k, std::uint32_t e) {
    List& l = lists_[k];
    if (l.cur == l.end) grow(l);
    *l.cur++ = e;
  }
  // f(span) for each block of chunk k, in order.
  template <class F>
  void for_each_span(std::size_t k, F&& f) const {
    const List& l = lists_[k];
    for (std::size_t b = 0; b < l.blocks.size(); ++b) {
      const bool last = b + 1 == l.blocks.size();
      const std::uint32_t* begin = l.blocks[b].first;
      f(std::span<const std::uint32_t>(begin, last ? l.cur : begin + l.blocks[b].second));
    }
  }

 private:
  struct List {
    std::uint32_t* cur = nullptr;
    std::uint32_t* end = nullptr;
    std::vector<std::pair<std::uint32_t*, std::size_t>> blocks;  // start, capacity
  };
  static constexpr std::size_t kSlab = std::size_t{1} << 18, kFirst = 16, kLargest = 1024;

  void grow(List& l) {
    const std::size_t size = l.blocks.empty() ? kFirst : std::min(kLargest, 2 * l.blocks.back().second);
    if (static_cast<std::size_t>(slab_end_ - slab_cur_) < size) {
      slabs_.emplace_back(new std::uint32_t[kSlab]);
      slab_cur_ = slabs_.back().get();
      slab_end_ = slab_cur_ + kSlab;
    }
    l.blocks.emplace_back(slab_cur_, size);
    l.cur = slab_cur_;
    l.end = slab_cur_ + size;
    slab_cur_ += size;
  }

  std::vector<List> lists_;
  std::vector<std::unique_ptr<std::uint32_t[]>> slabs_;
  std::uint32_t* slab_cur_ = nullptr;
  std::uint32_t* slab_end_ = nullptr;
};

// Simulates one chunk at a time; state is reused across chunks.
class ChunkSimulator {
 public:
  explicit ChunkSimulator(int n) : n_(n), sets_(n), slots_(static_cast<std::size_t>(n)) {}

  // Runs chunk k's entries; returns the index of the first faulty entry (described in `fault`
  // when given), or kNone.
  // `parts`: the entries of consecutive stretches of the schedule, in order.
  std::uint32_t run(std::span<const ChunkEntries> parts, std::size_t k, ChunkFault* fault = nullptr) {
    start_chunk();
    std::uint32_t base = 0, result = kNone;
    for (const ChunkEntries& part : parts)
      part.for_each_span(k, [&](std::span<const std::uint32_t> span) {
        if (result != kNone) return;
        const std::uint32_t j = run_span(span, fault);
        if (j != kNone) result = base + j;
        base += static_cast<std::uint32_t>(span.size());
      });
    if (result == kNone) end_round();
    return result;
  }

  std::uint32_t run_span(std::span<const std::uint32_t> entries, ChunkFault* fault) {
    const std::uint32_t* e = entries.data();
    const auto count = static_cast<std::uint32_t>(entries.size());
    for (std::uint32_t j = 0; j < count; ++j) {
      const std::uint32_t x = e[j];
      if (entry_new_round(x)) end_round();
      const int d = entry_dst(x);
      const bool copy = entry_copy(x);
      Slot& from_slot = slot(entry_src(x));
      Slot& to = slot(d);
      // Every transfer of a round reads the state from before the round.
      const Handle from = from_slot.stamp == round_ ? from_slot.old : from_slot.cur;
      if (to.stamp == round_) {  // a second write to (d, chunk) in this round (ports = all)
        if (to.copy || copy) return fail(j, fault, true, d, 0, 0);
        if (sets_.intersects(to.cur, from)) return fail(j, fault, false, d, to.cur, from);
        const Handle u = sets_.unite(to.cur, from);
        sets_.release(to.cur);
        to.cur = u;
        continue;
      }
      if (!copy && sets_.intersects(to.cur, from)) return fail(j, fault, false, d, to.cur, from);
      to.old = to.cur;  // its reference moves to old, released when the round ends
      to.stamp = round_;
      to.copy = copy;
      if (is_arena(to.old)) written_.push_back(d);
      if (copy) {
        sets_.retain(from);
        to.cur = from;
      } else {
        to.cur = sets_.unite(to.old, from);
      }
    }
    return kNone;
  }

  // After run() without a fault: the lowest rank whose set is not complete, or kNone.
  std::uint32_t first_incomplete() {
    for (int r = 0; r < n_; ++r) {
      const Slot& x = slots_[static_cast<std::size_t>(r)];
      if (x.epoch != epoch_ || sets_.size(x.cur) != n_) return static_cast<std::uint32_t>(r);
    }
    return kNone;
  }
  std::vector<bool> members_of(int r) { return sets_.members(slot(r).cur); }

 private:
  struct Slot {
    Handle cur = 0;
    Handle old = 0;           // the set before this round, if written in it
    std::uint32_t epoch = 0;  // != epoch_: untouched in this chunk, i.e. {rank}
    std::uint32_t stamp = 0;  // the round that last wrote it
    bool copy = false;        // that write was a copy
  };

  Slot& slot(int r) {
    Slot& x = slots_[static_cast<std::size_t>(r)];
    if (x.epoch != epoch_) {
      x.epoch = epoch_;
      x.cur = singleton(r);
      x.stamp = 0;
    }
    return x;
  }
  void start_chunk() {
    sets_.reset();
    written_.clear();
    ++epoch_;
    ++round_;
  }
  void end_round() {
    for (int d : written_) sets_.release(slots_[static_cast<std::size_t>(d)].old);
    written_.clear();
    ++round_;
  }
  std::uint32_t fail(std::uint32_t j, ChunkFault* fault, bool copy_conflict, int d, Handle have, Handle add) {
    if (fault) {
      fault->copy_conflict = copy_conflict;
      fault->dst = d;
      if (!copy_conflict) {
        const std::vector<bool> a = sets_.members(have), b = sets_.members(add);
        fault->overlap.assign(a.size(), false);
        for (std::size_t r = 0; r < a.size(); ++r) fault->overlap[r] = a[r] && b[r];
      }
    }
    return j;
  }

  int n_;
  RankSets sets_;
  std::vector<Slot> slots_;
  std::vector<int> written_;  // ranks whose old set is a bitset to release when the round ends
  std::uint32_t epoch_ = 0, round_ = 0;
};

// ---- The verifier ------------------------------------------------------------------------

// A stretch of rounds read by one thread: its chunk entries, β costs and first violation.
struct Part {
  std::size_t first_round = 0, end_round = 0;  // rounds of the whole schedule
  ChunkEntries entries;
  std::vector<std::uint32_t> last_round;  // per chunk id: the round of its last entry
  std::vector<double> round_cost;         // per round read without a violation
  std::vector<char> round_waits;
  bool stopped = false;  // a violation; the (transfer, chunk) pairs before it have entries
  std::string error;
  std::size_t stop_round = 0, stop_transfer = 0, stop_chunks = 0;
};

// Runs f(i) for i in [0, count) on up to `threads` threads; rethrows the first exception.
template <class F>
void parallel_for(std::size_t count, int threads, F&& f) {
  if (threads <= 1 || count <= 1) {
    for (std::size_t i = 0; i < count; ++i) f(i);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
  auto slot = [&](int t) {  // every threads-th index from t
    try {
      for (std::size_t i = static_cast<std::size_t>(t); i < count; i += static_cast<std::size_t>(threads)) f(i);
    } catch (...) {
      errors[static_cast<std::size_t>(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads - 1));
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(slot, t);
  } catch (const std::system_error&) {
    // No more threads (a pids limit of a container or batch job): the slots not started run
    // here; a joinable std::thread destroyed unjoined would terminate the process.
  }
  slot(0);
  for (int t = static_cast<int>(pool.size()) + 1; t < threads; ++t) slot(t);
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

template <class Source>
class Verifier {
 public:
  // threads = 0: one per core (at most 4) for schedules of a million transfers or more, else 1.
  Verifier(const Source& s, int threads) : s_(s), n_(s.nranks()), nchunks_(s.nchunks()), requested_(threads) {}

  VerifyReport run() {
    VerifyReport rep;
    if (!check_header(rep)) return rep;
    for (std::size_t p = 0; p < s_.nphases(); ++p) rep.rounds_per_phase.push_back(static_cast<int>(s_.phase_rounds(p)));
    read_schedule();
    for (std::size_t i = 0; i < used_parts_; ++i) entries_.push_back(std::move(parts_[i].entries));
    // Each chunk alone; chunks are shared out among the threads, each with its own simulator.
    const std::size_t ids = sparse_ ? chunk_ids_.size() : static_cast<std::size_t>(nchunks_);
    std::vector<std::uint32_t> fault_at(ids, kNone);
    struct Worst {
      int rank = -1, chunk = 0;
      bool fault = false;
    };
    std::vector<Worst> worst(static_cast<std::size_t>(threads_));
    std::vector<std::unique_ptr<ChunkSimulator>> sims(static_cast<std::size_t>(threads_));
    const std::size_t stride = (ids + static_cast<std::size_t>(threads_) - 1) / static_cast<std::size_t>(threads_);
    parallel_for(static_cast<std::size_t>(threads_), threads_, [&](std::size_t t) {
      sims[t] = std::make_unique<ChunkSimulator>(n_);
      ChunkSimulator& sim = *sims[t];
      Worst& w = worst[t];
      for (std::size_t k = t * stride; k < std::min(ids, (t + 1) * stride); ++k) {
        const std::uint32_t j = sim.run(entries_, k);
        if (j != kNone) {
          fault_at[k] = j;
          w.fault = true;
          continue;
        }
        if (w.fault) continue;  // a fault will be reported, not completeness
        const std::uint32_t r = sim.first_incomplete();
        const int c = chunk_of(k);
        if (r != kNone && (w.rank < 0 || std::pair(static_cast<int>(r), c) < std::pair(w.rank, w.chunk))) {
          w.rank = static_cast<int>(r);
          w.chunk = c;
        }
      }
    });
    ChunkSimulator& sim = *sims[0];
    for (const Worst& w : worst)
      if (w.fault) return report_fault(rep, sim, fault_at);
    const Part& last = parts_[used_parts_ - 1];
    if (last.stopped) {
      rep.message = last.error;
      rep.rounds_per_phase.resize(phase_of_round(last.stop_round) + 1);
      finish_costs(rep, last.stop_round);
      return rep;
    }
    finish_costs(rep, std::numeric_limits<std::size_t>::max());
    // Completeness: the first (rank, chunk) in rank-major order. With sparse ids a chunk no
    // transfer touches may remain; it leaves rank 0 incomplete.
    int best_rank = -1, best_chunk = 0;
    for (const Worst& w : worst)
      if (w.rank >= 0 && (best_rank < 0 || std::pair(w.rank, w.chunk) < std::pair(best_rank, best_chunk))) {
        best_rank = w.rank;
        best_chunk = w.chunk;
      }
    if (sparse_ && chunk_ids_.size() < static_cast<std::size_t>(nchunks_)) {
      std::vector<int> touched = chunk_ids_;
      std::sort(touched.begin(), touched.end());
      int untouched = 0;
      while (static_cast<std::size_t>(untouched) < touched.size() && touched[static_cast<std::size_t>(untouched)] == untouched)
        ++untouched;
      if (best_rank != 0 || untouched < best_chunk) {
        best_rank = 0;
        best_chunk = untouched;
      }
    }
    if (best_rank < 0) {
      rep.ok = true;
      return rep;
    }
    std::vector<bool> have(static_cast<std::size_t>(n_), false);
    have[static_cast<std::size_t>(best_rank)] = true;
    if (const std::size_t k = find_id(best_chunk); k != kNoId) {
      sim.run(entries_, k);
      have = sim.members_of(best_rank);
    }
    rep.message = "incomplete result: after the last round rank " + std::to_string(best_rank) + " chunk " +
                  std::to_string(best_chunk) + " lacks the contributions of ranks " + describe(have, true);
    return rep;
  }

 private:
  static constexpr std::size_t kNoId = std::numeric_limits<std::size_t>::max();
  // Up to this many chunks a chunk is its own id (every synthesized schedule: K(n-1) <= 2^16);
  // above, ids go to the chunks some transfer touches, in the order they are met.
  static constexpr int kDenseChunks = 1 << 16;

  bool check_header(VerifyReport& rep) {
    const int n = n_;
    auto bad = [&](const std::string& m) {
      rep.message = m;
      return false;
    };
    if (n < 2) return bad("nranks = " + std::to_string(n) + ", expected at least 2");
    if (n > detail::kMaxVerifiedRanks)
      return bad("nranks = " + std::to_string(n) + ", expected at most " + std::to_string(detail::kMaxVerifiedRanks) +
                 " (the verifier's limit)");
    if (nchunks_ < 1) return bad("nchunks = " + std::to_string(nchunks_) + ", expected at least 1");
    if (s_.ports() != 1 && s_.ports() != kAllPorts)
      return bad("ports = " + std::to_string(s_.ports()) + ", expected 1 or all");
    const std::optional<int> st = s_.straggler();
    if (st && (*st < 0 || *st >= n))
      return bad("straggler = " + std::to_string(*st) + ", expected a rank in [0, " + std::to_string(n) + ")");
    const std::vector<int>& set = s_.stragglers();
    if (st && !set.empty()) return bad("straggler and stragglers both given, expected one of them");
    for (std::size_t i = 0; i < set.size(); ++i) {
      if (set[i] < 0 || set[i] >= n)
        return bad("stragglers[" + std::to_string(i) + "] = " + std::to_string(set[i]) + ", expected a rank in [0, " +
                   std::to_string(n) + ")");
      if (i > 0 && set[i] <= set[i - 1]) return bad("stragglers not strictly ascending");
    }
    return true;
  }

  std::string where(std::size_t p, std::size_t r, std::size_t ti, const TransferView& t) const {
    std::ostringstream o;
    o << "phase '" << s_.phase_name(p) << "' (" << p << ") round " << r << " transfer " << ti << " (" << t.src << "->"
      << t.dst << " " << to_string(t.op) << " chunks " << chunk_list(t.chunks) << "): ";
    return o.str();
  }

  std::size_t find_id(int c) const {
    if (!sparse_) return static_cast<std::size_t>(c);
    const auto it = sparse_ids_.find(c);
    return it == sparse_ids_.end() ? kNoId : it->second;
  }
  int chunk_of(std::size_t k) const { return sparse_ ? chunk_ids_[k] : static_cast<int>(k); }
  std::size_t phase_of_round(std::size_t g) const {
    std::size_t p = 0;
    for (std::size_t first = 0; p < s_.nphases(); ++p) {
      first += s_.phase_rounds(p);
      if (g < first) break;
    }
    return p;
  }

  // Reading the schedule: every check that needs no sets, β costs, and each chunk's entries, in
  // stretches of rounds of about equal size, one per thread (one stretch with sparse ids, whose
  // numbering is shared). The stretches before the first one with a violation, and that one up
  // to it, are used — exactly what the round-by-round verifier had applied when it stopped.
  void read_schedule() {
    sparse_ = nchunks_ > kDenseChunks;
    std::size_t rounds = 0, transfers = 0;
    for (std::size_t p = 0; p < s_.nphases(); ++p)
      for (std::size_t r = 0; r < s_.phase_rounds(p); ++r, ++rounds) transfers += s_.round_size(p, r);
    threads_ = requested_ > 0 ? requested_
               : transfers >= (std::size_t{1} << 20)
                   ? static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1U, 4U))
                   : 1;
    const int nparts = sparse_ ? 1 : threads_;
    parts_.resize(static_cast<std::size_t>(nparts));
    // Cut where the running transfer count passes i/nparts of the total.
    std::size_t g = 0, seen = 0, part = 0;
    for (std::size_t p = 0; p < s_.nphases(); ++p)
      for (std::size_t r = 0; r < s_.phase_rounds(p); ++r, ++g) {
        while (part + 1 < parts_.size() &&
               seen >= transfers * (part + 1) / parts_.size()) {  // this round starts the next part
          parts_[part].end_round = g;
          parts_[++part].first_round = g;
        }
        seen += s_.round_size(p, r);
      }
    parts_[part].end_round = rounds;
    for (std::size_t i = part + 1; i < parts_.size(); ++i) parts_[i].first_round = parts_[i].end_round = rounds;
    parallel_for(parts_.size(), nparts, [&](std::size_t i) { read_part(parts_[i]); });
    used_parts_ = parts_.size();
    for (std::size_t i = 0; i < parts_.size(); ++i)
      if (parts_[i].stopped) {
        used_parts_ = i + 1;
        break;
      }
  }
  std::size_t id_of(int c) {  // sparse ids (one part only): assigned when first met
    if (!sparse_) return static_cast<std::size_t>(c);
    auto [it, added] = sparse_ids_.try_emplace(c, chunk_ids_.size());
    if (added) {
      chunk_ids_.push_back(c);
      parts_[0].entries.resize(chunk_ids_.size());
      parts_[0].last_round.push_back(kNone);
    }
    return it->second;
  }

  void read_part(Part& part) {
    const int n = n_;
    const bool single_port = s_.ports() == 1;
    // The late ranks (one straggler, or the set of StragglAR-k): none of them may
    // take part in a phase that does not wait for them.
    std::vector<char> late(static_cast<std::size_t>(n), 0);
    bool any_late = false;
    if (const std::optional<int> st = s_.straggler()) late[static_cast<std::size_t>(*st)] = 1, any_late = true;
    for (int r : s_.stragglers()) late[static_cast<std::size_t>(r)] = 1, any_late = true;
    if (!sparse_) {
      part.entries.resize(static_cast<std::size_t>(nchunks_));
      part.last_round.assign(static_cast<std::size_t>(nchunks_), kNone);
    }
    struct PortUse {  // per rank: the round it last sent / received in, and how many chunks
      std::uint32_t send_round = 0, recv_round = 0;
      long long sent = 0, received = 0;
    };
    std::vector<PortUse> use(static_cast<std::size_t>(n));
    std::size_t g = 0;
    for (std::size_t p = 0; p < s_.nphases() && g < part.end_round; ++p) {
      const bool waits = s_.phase_waits(p);
      for (std::size_t r = 0; r < s_.phase_rounds(p) && g < part.end_round; ++r, ++g) {
        if (g < part.first_round) continue;
        const auto round = static_cast<std::uint32_t>(g + 1);  // 0: "never"
        long long most = 0;
        const bool complete = s_.visit_round(p, r, [&](std::size_t ti, const TransferView& t) {
          std::size_t k = 0;  // chunks of t that have entries
          auto err = [&](const std::string& m) {
            part.error = where(p, r, ti, t) + m;
            part.stopped = true;
            part.stop_round = g;
            part.stop_transfer = ti;
            part.stop_chunks = k;
            return false;
          };
          if (t.src < 0 || t.src >= n || t.dst < 0 || t.dst >= n)
            return err("rank out of range [0, " + std::to_string(n) + ")");
          if (t.src == t.dst) return err("a rank cannot send to itself");
          if (t.chunks.empty()) return err("no chunks");
          if (!waits) {
            if (!any_late) return err("phase does not wait for the straggler but the schedule names none");
            if (late[static_cast<std::size_t>(t.src)] || late[static_cast<std::size_t>(t.dst)])
              return err("straggler " + std::to_string(late[static_cast<std::size_t>(t.src)] ? t.src : t.dst) +
                         " takes part in a phase that does not wait for it");
          }
          PortUse& from = use[static_cast<std::size_t>(t.src)];
          PortUse& to = use[static_cast<std::size_t>(t.dst)];
          if (from.send_round != round) {
            from.send_round = round;
            from.sent = 0;
          } else if (single_port) {
            return err("port violation: rank " + std::to_string(t.src) + " sends twice in one round (ports = 1)");
          }
          if (to.recv_round != round) {
            to.recv_round = round;
            to.received = 0;
          } else if (single_port) {
            return err("port violation: rank " + std::to_string(t.dst) + " receives twice in one round (ports = 1)");
          }
          const std::uint32_t fresh = entry(t.src, t.dst, t.op, true), same = fresh & ~kEntryNewRound;
          for (; k < t.chunks.size(); ++k) {
            const int c = t.chunks[k];
            if (c < 0 || c >= nchunks_)
              return err("chunk " + std::to_string(c) + " out of range [0, " + std::to_string(nchunks_) + ")");
            if (k > 0 && c <= t.chunks[k - 1]) return err("chunk list not strictly ascending");
            const std::size_t id = id_of(c);
            std::uint32_t& last = part.last_round[id];
            part.entries.push(id, last != round ? fresh : same);
            last = round;
          }
          const long long size = static_cast<long long>(t.chunks.size());
          most = std::max({most, from.sent += size, to.received += size});
          return true;
        });
        if (!complete) return;
        part.round_cost.push_back(static_cast<double>(most) / nchunks_);
        part.round_waits.push_back(waits ? 1 : 0);
      }
    }
  }

  // Visits, in schedule order, every (transfer, chunk) that has an entry: f(chunk, phase,
  // round in phase, round in schedule, transfer in round, transfer) → false stops.
  template <class F>
  void visit_entries(F&& f) const {
    const Part& last_part = parts_[used_parts_ - 1];
    const bool stopped = last_part.stopped;
    std::size_t g = 0;
    for (std::size_t p = 0; p < s_.nphases(); ++p) {
      for (std::size_t r = 0; r < s_.phase_rounds(p); ++r, ++g) {
        if (stopped && g > last_part.stop_round) return;
        const bool last = stopped && g == last_part.stop_round;
        const bool complete = s_.visit_round(p, r, [&](std::size_t ti, const TransferView& t) {
          std::size_t chunks = t.chunks.size();
          if (last && ti >= last_part.stop_transfer) {
            if (ti > last_part.stop_transfer) return false;
            chunks = last_part.stop_chunks;
          }
          for (std::size_t k = 0; k < chunks; ++k)
            if (!f(t.chunks[k], p, r, g, ti, t)) return false;
          return !(last && ti == last_part.stop_transfer);
        });
        if (!complete) return;
      }
    }
  }

  // The earliest faulty entry in schedule order: count each chunk's entries again until one is
  // its chunk's first fault.
  VerifyReport& report_fault(VerifyReport& rep, ChunkSimulator& sim, const std::vector<std::uint32_t>& fault_at) {
    std::vector<std::uint32_t> seen(fault_at.size(), 0);
    std::string message;
    std::size_t fault_round = 0;
    visit_entries([&](int c, std::size_t p, std::size_t r, std::size_t g, std::size_t ti, const TransferView& t) {
      const std::size_t k = find_id(c);
      if (seen[k]++ != fault_at[k]) return true;
      ChunkFault fault;
      sim.run(entries_, k, &fault);
      const std::string d = std::to_string(fault.dst), cs = std::to_string(c);
      message = where(p, r, ti, t) +
                (fault.copy_conflict ? "rank " + d + " chunk " + cs +
                                           " is written by two transfers in one round and one of them is a copy"
                                     : "double counting: rank " + d + " chunk " + cs +
                                           " already holds the contributions of ranks " + describe(fault.overlap));
      fault_round = g;
      return false;
    });
    if (message.empty()) throw Error(ErrorCode::Internal, "verify: a faulty chunk entry was not found again");
    rep.message = message;
    rep.rounds_per_phase.resize(phase_of_round(fault_round) + 1);
    finish_costs(rep, fault_round);
    return rep;
  }

  // β costs of the rounds before `end`, in order (the totals the round-by-round verifier had
  // when it stopped).
  void finish_costs(VerifyReport& rep, std::size_t end) const {
    rep.beta_cost_total = rep.beta_cost_waiting = 0;
    for (std::size_t i = 0; i < used_parts_; ++i) {
      const Part& part = parts_[i];
      for (std::size_t j = 0; j < part.round_cost.size() && part.first_round + j < end; ++j) {
        rep.beta_cost_total += part.round_cost[j];
        if (part.round_waits[j]) rep.beta_cost_waiting += part.round_cost[j];
      }
    }
  }

  const Source& s_;
  int n_, nchunks_, requested_, threads_ = 1;
  bool sparse_ = false;
  std::unordered_map<int, std::size_t> sparse_ids_;
  std::vector<int> chunk_ids_;  // sparse: the chunk of each id
  std::vector<Part> parts_;
  std::size_t used_parts_ = 0;  // the parts up to the first with a violation
  std::vector<ChunkEntries> entries_;  // theirs, in order
};

std::string summary_line(const std::string& algorithm, int nranks, std::optional<int> straggler,
                         const std::vector<int>& stragglers, int nchunks, int ports,
                         const std::vector<std::pair<std::string, std::size_t>>& phases, const VerifyReport& r) {
  std::ostringstream o;
  std::string late = straggler ? std::to_string(*straggler) : "none";
  if (!stragglers.empty()) {
    late.clear();
    for (std::size_t i = 0; i < stragglers.size() && i < 8; ++i) {  // a few: readable at any k
      if (i > 0) late.push_back(',');
      late.append(std::to_string(stragglers[i]));
    }
    if (stragglers.size() > 8) late.append(",... (" + std::to_string(stragglers.size()) + " ranks)");
  }
  o << algorithm << " n=" << nranks << (stragglers.empty() ? " straggler=" : " stragglers=") << late
    << " chunks=" << nchunks << " ports=" << (ports == kAllPorts ? "all" : std::to_string(ports)) << ": ";
  for (std::size_t i = 0; i < phases.size(); ++i) o << (i ? " + " : "") << phases[i].first << " " << phases[i].second;
  o << " rounds, beta cost " << r.beta_cost_total << " s";
  if (r.beta_cost_waiting != r.beta_cost_total) o << " (after the straggler arrives: " << r.beta_cost_waiting << " s)";
  return o.str();
}

}  // namespace

VerifyReport verify(const Schedule& s) {
  const ScheduleSource source(s);
  return Verifier<ScheduleSource>(source, 0).run();
}

void verify_or_throw(const Schedule& s) {
  VerifyReport r = verify(s);
  if (!r.ok) throw Error(ErrorCode::InvalidSchedule, s.algorithm + " schedule (n=" + std::to_string(s.nranks) + "): " + r.message);
}

std::string summary(const Schedule& s, const VerifyReport& r) {
  std::vector<std::pair<std::string, std::size_t>> phases;
  for (const Phase& p : s.phases) phases.emplace_back(p.name, p.rounds.size());
  return summary_line(s.algorithm, s.nranks, s.straggler, s.stragglers, s.nchunks, s.ports, phases, r);
}

namespace detail {

VerifyReport verify(const PackedSchedule& s, int threads) {
  const PackedSource source(s);
  return Verifier<PackedSource>(source, threads).run();
}

VerifyReport verify(const Schedule& s, int threads) {
  const ScheduleSource source(s);
  return Verifier<ScheduleSource>(source, threads).run();
}

void verify_or_throw(const PackedSchedule& s) {
  VerifyReport r = verify(s);
  if (!r.ok)
    throw Error(ErrorCode::InvalidSchedule,
                s.header().algorithm + " schedule (n=" + std::to_string(s.header().nranks) + "): " + r.message);
}

std::string summary(const PackedSchedule& s, const VerifyReport& r) {
  std::vector<std::pair<std::string, std::size_t>> phases;
  for (const PackedSchedule::PhaseInfo& p : s.phases()) phases.emplace_back(p.name, p.end_round - p.first_round);
  const ScheduleHeader& h = s.header();
  return summary_line(h.algorithm, h.nranks, h.straggler, h.stragglers, h.nchunks, h.ports, phases, r);
}

}  // namespace detail
}  // namespace stragglar
