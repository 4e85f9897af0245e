// Exact symbolic execution of a schedule (DESIGN.md "Verifier"; docs/verification.md).
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
// O(n²) bits of set state (issue #15):
//   1. One pass in schedule order checks everything that needs no sets (ranks, ports, the
//      straggler rule, chunk ranges and order), adds up the β cost, and counts each chunk's
//      transfers.
//   2. A second pass lists each chunk's transfers in schedule order (4 bytes each: src, dst, op
//      and "first of a new round"), chunk by chunk in one array.
//   3. The chunks are independent: each is simulated alone, with one set per rank — n sets of
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
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <span>
#include <string>
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
  std::size_t nphases() const { return s_.phases.size(); }
  const std::string& phase_name(std::size_t p) const { return s_.phases[p].name; }
  bool phase_waits(std::size_t p) const { return s_.phases[p].waits_for_straggler; }
  std::size_t phase_rounds(std::size_t p) const { return s_.phases[p].rounds.size(); }
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
  std::size_t nphases() const { return s_.phases().size(); }
  const std::string& phase_name(std::size_t p) const { return s_.phases()[p].name; }
  bool phase_waits(std::size_t p) const { return s_.phases()[p].waits_for_straggler; }
  std::size_t phase_rounds(std::size_t p) const { return s_.phases()[p].end_round - s_.phases()[p].first_round; }
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

  [[gnu::noinline]] Handle unite_general(Handle x, Handle y) {
    if (!is_arena(x) && !is_arena(y)) {
      // Merge the two sorted interval lists, joining touching ends.
      Interval a[2], b[2], all[4];
      const int ka = intervals(x, a), kb = intervals(y, b);
      int m = 0;
      for (int i = 0, j = 0; i < ka || j < kb;) {
        const Interval next = (j >= kb || (i < ka && a[i].a < b[j].a)) ? a[i++] : b[j++];
        if (m > 0 && all[m - 1].b == next.a) all[m - 1].b = next.b;
        else all[m++] = next;
      }
      if (m <= 2) return m == 1 ? inline_handle(all[0]) : inline_handle(all[0], all[1]);
      const std::uint32_t i = allocate();
      std::uint64_t* out = bits(i);
      std::fill(out, out + words_, 0);
      for (int j = 0; j < m; ++j) set_range(out, all[j]);
      count_[i] = size(x) + size(y);
      return arena_handle(i);
    }
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

// Simulates one chunk at a time; state is reused across chunks.
class ChunkSimulator {
 public:
  explicit ChunkSimulator(int n) : n_(n), sets_(n), slots_(static_cast<std::size_t>(n)) {}

  // Runs the chunk's entries; returns the index of the first faulty entry (described in `fault`
  // when given), or kNone.
  std::uint32_t run(std::span<const std::uint32_t> entries, ChunkFault* fault = nullptr) {
    start_chunk();
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
    end_round();
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

template <class Source>
class Verifier {
 public:
  explicit Verifier(const Source& s) : s_(s), n_(s.nranks()), nchunks_(s.nchunks()) {}

  VerifyReport run() {
    VerifyReport rep;
    if (!check_header(rep)) return rep;
    structural_pass(rep);
    map_chunks();
    fill_index();
    ChunkSimulator sim(n_);
    std::vector<std::uint32_t> fault_at;  // per chunk id: its first faulty entry (once there is one)
    std::uint32_t best_rank = kNone;
    std::size_t best_id = 0;
    for (std::size_t k = 0; k < ids(); ++k) {
      const std::uint32_t j = sim.run(entries(k));
      if (j != kNone) {
        if (fault_at.empty()) fault_at.assign(ids(), kNone);
        fault_at[k] = j;
        continue;
      }
      if (!fault_at.empty()) continue;
      const std::uint32_t r = sim.first_incomplete();
      if (r != kNone && (best_rank == kNone || r < best_rank)) {  // ids ascend with chunks
        best_rank = r;
        best_id = k;
      }
    }
    if (!fault_at.empty()) return report_fault(rep, sim, fault_at);
    if (stopped_) {
      rep.message = structural_error_;
      finish_costs(rep, stop_round_);
      return rep;
    }
    finish_costs(rep, round_cost_.size());
    // Completeness: the first (rank, chunk) in rank-major order. A chunk no transfer touches
    // (only possible with sparse ids) leaves rank 0 incomplete.
    std::size_t chunk = 0;
    int rank = -1;
    if (best_rank != kNone) {
      rank = static_cast<int>(best_rank);
      chunk = chunk_of(best_id);
    }
    if (sparse_ && touched_.size() < static_cast<std::size_t>(nchunks_)) {
      std::size_t untouched = 0;
      while (untouched < touched_.size() && touched_[untouched] == static_cast<int>(untouched)) ++untouched;
      if (rank != 0 || untouched < chunk) {
        rank = 0;
        chunk = untouched;
      }
    }
    if (rank < 0) {
      rep.ok = true;
      return rep;
    }
    std::vector<bool> have(static_cast<std::size_t>(n_), false);
    have[static_cast<std::size_t>(rank)] = true;
    if (const std::size_t k = id_of(static_cast<int>(chunk)); k != kNoId) {
      sim.run(entries(k));
      have = sim.members_of(rank);
    }
    rep.message = "incomplete result: after the last round rank " + std::to_string(rank) + " chunk " +
                  std::to_string(chunk) + " lacks the contributions of ranks " + describe(have, true);
    return rep;
  }

 private:
  static constexpr std::size_t kNoId = std::numeric_limits<std::size_t>::max();
  // Above this many chunks, ids go only to the chunks some transfer touches (a header may say
  // 2^24 chunks and list a few transfers).
  static constexpr int kDenseChunks = 1 << 20;

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
    return true;
  }

  std::string where(std::size_t p, std::size_t r, std::size_t ti, const TransferView& t) const {
    std::ostringstream o;
    o << "phase '" << s_.phase_name(p) << "' (" << p << ") round " << r << " transfer " << ti << " (" << t.src << "->"
      << t.dst << " " << to_string(t.op) << " chunks " << chunk_list(t.chunks) << "): ";
    return o.str();
  }

  // Pass 1: checks that need no sets, β costs, and (dense ids) each chunk's entry count. Stops
  // at the first violation; the (transfer, chunk) pairs before it are counted — exactly what the
  // round-by-round verifier had applied when it met the violation.
  void structural_pass(VerifyReport& rep) {
    const int n = n_;
    const bool single_port = s_.ports() == 1;
    const std::optional<int> straggler = s_.straggler();
    sparse_ = nchunks_ > kDenseChunks;
    if (!sparse_) count_.assign(static_cast<std::size_t>(nchunks_), 0);
    struct PortUse {  // per rank: the round it last sent / received in, and how many chunks
      std::uint32_t send_round = 0, recv_round = 0;
      long long sent = 0, received = 0;
    };
    std::vector<PortUse> use(static_cast<std::size_t>(n));
    std::uint32_t stamp = 0;
    std::uint32_t* count = count_.data();  // locals: members would be reloaded after every store
    std::size_t incidences = 0;
    for (std::size_t p = 0; p < s_.nphases(); ++p) {
      rep.rounds_per_phase.push_back(static_cast<int>(s_.phase_rounds(p)));
      const bool waits = s_.phase_waits(p);
      for (std::size_t r = 0; r < s_.phase_rounds(p); ++r) {
        ++stamp;
        long long most = 0;
        const bool complete = s_.visit_round(p, r, [&](std::size_t ti, const TransferView& t) {
          std::size_t k = 0;  // chunks of t counted so far
          auto err = [&](const std::string& m) {
            structural_error_ = where(p, r, ti, t) + m;
            stopped_ = true;
            stop_round_ = round_cost_.size();
            stop_transfer_ = ti;
            stop_chunks_ = k;
            return false;
          };
          if (t.src < 0 || t.src >= n || t.dst < 0 || t.dst >= n)
            return err("rank out of range [0, " + std::to_string(n) + ")");
          if (t.src == t.dst) return err("a rank cannot send to itself");
          if (t.chunks.empty()) return err("no chunks");
          if (!waits) {
            if (!straggler) return err("phase does not wait for the straggler but the schedule names none");
            if (t.src == *straggler || t.dst == *straggler)
              return err("straggler " + std::to_string(*straggler) + " takes part in a phase that does not wait for it");
          }
          PortUse& from = use[static_cast<std::size_t>(t.src)];
          PortUse& to = use[static_cast<std::size_t>(t.dst)];
          if (from.send_round != stamp) {
            from.send_round = stamp;
            from.sent = 0;
          } else if (single_port) {
            return err("port violation: rank " + std::to_string(t.src) + " sends twice in one round (ports = 1)");
          }
          if (to.recv_round != stamp) {
            to.recv_round = stamp;
            to.received = 0;
          } else if (single_port) {
            return err("port violation: rank " + std::to_string(t.dst) + " receives twice in one round (ports = 1)");
          }
          for (; k < t.chunks.size(); ++k) {
            const int c = t.chunks[k];
            if (c < 0 || c >= nchunks_)
              return err("chunk " + std::to_string(c) + " out of range [0, " + std::to_string(nchunks_) + ")");
            if (k > 0 && c <= t.chunks[k - 1]) return err("chunk list not strictly ascending");
            if (count) ++count[static_cast<std::size_t>(c)];
            ++incidences;
          }
          const long long size = static_cast<long long>(t.chunks.size());
          most = std::max({most, from.sent += size, to.received += size});
          return true;
        });
        if (!complete) {
          incidences_ = incidences;
          return;
        }
        round_cost_.push_back(static_cast<double>(most) / nchunks_);
        round_waits_.push_back(waits ? 1 : 0);
      }
    }
    incidences_ = incidences;
    if (incidences_ >= kNone) {  // entries of one chunk are counted in 32 bits
      structural_error_ = "more than 2^32 - 2 (transfer, chunk) pairs, expected fewer (the verifier's limit)";
      std::fill(count_.begin(), count_.end(), 0);
      stopped_ = true;
      stop_round_ = 0;
      stop_transfer_ = 0;
      stop_chunks_ = 0;
    }
  }

  // Visits every counted (transfer, chunk) in schedule order: f(chunk, phase, round in phase,
  // round in schedule, transfer in round, transfer) → false stops.
  template <class F>
  void visit_counted(F&& f) const {
    std::size_t g = 0;
    for (std::size_t p = 0; p < s_.nphases(); ++p) {
      for (std::size_t r = 0; r < s_.phase_rounds(p); ++r, ++g) {
        if (stopped_ && g > stop_round_) return;
        const bool last = stopped_ && g == stop_round_;
        const bool complete = s_.visit_round(p, r, [&](std::size_t ti, const TransferView& t) {
          std::size_t chunks = t.chunks.size();
          if (last && ti >= stop_transfer_) {
            if (ti > stop_transfer_) return false;
            chunks = stop_chunks_;
          }
          for (std::size_t k = 0; k < chunks; ++k)
            if (!f(t.chunks[k], p, r, g, ti, t)) return false;
          return !(last && ti == stop_transfer_);
        });
        if (!complete) return;
      }
    }
  }

  // Sparse ids: the touched chunks, ascending.
  void map_chunks() {
    if (!sparse_) return;
    touched_.reserve(incidences_);
    visit_counted([&](int c, std::size_t, std::size_t, std::size_t, std::size_t, const TransferView&) {
      touched_.push_back(c);
      return true;
    });
    std::sort(touched_.begin(), touched_.end());
    touched_.erase(std::unique(touched_.begin(), touched_.end()), touched_.end());
    count_.assign(touched_.size(), 0);
    visit_counted([&](int c, std::size_t, std::size_t, std::size_t, std::size_t, const TransferView&) {
      ++count_[id_of(c)];
      return true;
    });
  }
  std::size_t ids() const { return sparse_ ? touched_.size() : static_cast<std::size_t>(nchunks_); }
  std::size_t id_of(int c) const {
    if (!sparse_) return static_cast<std::size_t>(c);
    const auto it = std::lower_bound(touched_.begin(), touched_.end(), c);
    return it != touched_.end() && *it == c ? static_cast<std::size_t>(it - touched_.begin()) : kNoId;
  }
  std::size_t chunk_of(std::size_t id) const { return sparse_ ? static_cast<std::size_t>(touched_[id]) : id; }
  std::span<const std::uint32_t> entries(std::size_t k) const {
    return {index_.get() + offset_[k], offset_[k + 1] - offset_[k]};
  }

  // Pass 2: each chunk's entries in schedule order, one array.
  void fill_index() {
    offset_.assign(ids() + 1, 0);
    for (std::size_t k = 0; k < ids(); ++k) offset_[k + 1] = offset_[k] + count_[k];
    count_.clear();
    count_.shrink_to_fit();
    index_.reset(new std::uint32_t[offset_.back()]);  // every entry is written below
    std::vector<std::size_t> fill_at(offset_.begin(), offset_.end() - 1);
    std::vector<std::uint32_t> last_round_of(ids(), kNone);
    std::size_t* fill = fill_at.data();
    std::uint32_t* last_round = last_round_of.data();
    std::uint32_t* index = index_.get();
    visit_counted([&](int c, std::size_t, std::size_t, std::size_t g, std::size_t, const TransferView& t) {
      const std::size_t k = id_of(c);
      const auto round = static_cast<std::uint32_t>(g);
      index[fill[k]++] = entry(t.src, t.dst, t.op, last_round[k] != round);
      last_round[k] = round;
      return true;
    });
  }

  // The earliest faulty entry in schedule order: count each chunk's entries again until one is
  // its chunk's first fault.
  VerifyReport& report_fault(VerifyReport& rep, ChunkSimulator& sim, const std::vector<std::uint32_t>& fault_at) {
    std::vector<std::uint32_t> seen(ids(), 0);
    std::string message;
    std::size_t fault_phase = 0, fault_round = 0;
    visit_counted([&](int c, std::size_t p, std::size_t r, std::size_t g, std::size_t ti, const TransferView& t) {
      const std::size_t k = id_of(c);
      if (seen[k]++ != fault_at[k]) return true;
      ChunkFault fault;
      sim.run(entries(k), &fault);
      const std::string d = std::to_string(fault.dst), cs = std::to_string(c);
      message = where(p, r, ti, t) +
                (fault.copy_conflict ? "rank " + d + " chunk " + cs +
                                           " is written by two transfers in one round and one of them is a copy"
                                     : "double counting: rank " + d + " chunk " + cs +
                                           " already holds the contributions of ranks " + describe(fault.overlap));
      fault_phase = p;
      fault_round = g;
      return false;
    });
    if (message.empty()) throw Error(ErrorCode::Internal, "verify: a faulty chunk entry was not found again");
    rep.message = message;
    rep.rounds_per_phase.resize(fault_phase + 1);
    finish_costs(rep, fault_round);
    return rep;
  }

  // β costs of the rounds before `end` (the totals the round-by-round verifier had when it stopped).
  void finish_costs(VerifyReport& rep, std::size_t end) const {
    rep.beta_cost_total = rep.beta_cost_waiting = 0;
    for (std::size_t g = 0; g < end && g < round_cost_.size(); ++g) {
      rep.beta_cost_total += round_cost_[g];
      if (round_waits_[g]) rep.beta_cost_waiting += round_cost_[g];
    }
  }

  const Source& s_;
  int n_, nchunks_;
  bool sparse_ = false;
  std::vector<std::uint32_t> count_;  // per chunk id, until the index is laid out
  std::vector<int> touched_;
  std::vector<std::size_t> offset_;
  std::unique_ptr<std::uint32_t[]> index_;
  std::size_t incidences_ = 0;
  std::vector<double> round_cost_;  // per completed round
  std::vector<char> round_waits_;
  // The first structural violation: its message, and where pass 1 stopped counting.
  bool stopped_ = false;
  std::string structural_error_;
  std::size_t stop_round_ = 0, stop_transfer_ = 0, stop_chunks_ = 0;
};

std::string summary_line(const std::string& algorithm, int nranks, std::optional<int> straggler, int nchunks, int ports,
                         const std::vector<std::pair<std::string, std::size_t>>& phases, const VerifyReport& r) {
  std::ostringstream o;
  o << algorithm << " n=" << nranks << " straggler=" << (straggler ? std::to_string(*straggler) : "none")
    << " chunks=" << nchunks << " ports=" << (ports == kAllPorts ? "all" : std::to_string(ports)) << ": ";
  for (std::size_t i = 0; i < phases.size(); ++i) o << (i ? " + " : "") << phases[i].first << " " << phases[i].second;
  o << " rounds, beta cost " << r.beta_cost_total << " s";
  if (r.beta_cost_waiting != r.beta_cost_total) o << " (after the straggler arrives: " << r.beta_cost_waiting << " s)";
  return o.str();
}

}  // namespace

VerifyReport verify(const Schedule& s) { return Verifier<ScheduleSource>(ScheduleSource(s)).run(); }

void verify_or_throw(const Schedule& s) {
  VerifyReport r = verify(s);
  if (!r.ok) throw Error(ErrorCode::InvalidSchedule, s.algorithm + " schedule (n=" + std::to_string(s.nranks) + "): " + r.message);
}

std::string summary(const Schedule& s, const VerifyReport& r) {
  std::vector<std::pair<std::string, std::size_t>> phases;
  for (const Phase& p : s.phases) phases.emplace_back(p.name, p.rounds.size());
  return summary_line(s.algorithm, s.nranks, s.straggler, s.nchunks, s.ports, phases, r);
}

namespace detail {

VerifyReport verify(const PackedSchedule& s) {
  const PackedSource source(s);
  return Verifier<PackedSource>(source).run();
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
  return summary_line(h.algorithm, h.nranks, h.straggler, h.nchunks, h.ports, phases, r);
}

}  // namespace detail
}  // namespace stragglar
