// The verifier as it was before the chunk-by-chunk one (round by round, one shared bitset per (rank, chunk),
// O(n^3) bits at worst): the reference the fast verifier is compared against, report for report,
// on synthesized schedules and on random mutations of them (test_verify_differential.cpp, the
// fuzz test). Test-only; kept verbatim but for the namespace.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <sstream>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "stragglar/schedule.hpp"
#include "stragglar/verify.hpp"

namespace stragglar::reference {
namespace reference_detail {

class RankSet {
 public:
  explicit RankSet(int n) : n_(n), words_((static_cast<std::size_t>(n) + 63) / 64, 0) {}
  void insert(int r) { words_[static_cast<std::size_t>(r) / 64] |= std::uint64_t{1} << (r % 64); }
  bool contains(int r) const { return (words_[static_cast<std::size_t>(r) / 64] >> (r % 64)) & 1U; }
  bool intersects(const RankSet& o) const {
    for (std::size_t i = 0; i < words_.size(); ++i)
      if (words_[i] & o.words_[i]) return true;
    return false;
  }
  void unite(const RankSet& o) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= o.words_[i];
  }
  int count() const {
    int c = 0;
    for (std::uint64_t w : words_) c += __builtin_popcountll(w);
    return c;
  }
  // "{0,1,5}" — listing at most a few members keeps messages readable at n = 1024.
  std::string describe(bool complement = false) const {
    std::string out = "{";
    int listed = 0, total = 0;
    for (int r = 0; r < n_; ++r) {
      if (contains(r) == complement) continue;
      ++total;
      if (listed < 8) {
        if (listed++) out += ',';
        out += std::to_string(r);
      }
    }
    if (total > listed) out += ",... (" + std::to_string(total) + " ranks)";
    return out + "}";
  }

 private:
  int n_;
  std::vector<std::uint64_t> words_;
};

using SetPtr = std::shared_ptr<const RankSet>;

inline std::string chunk_list(std::span<const int> chunks) {
  std::string s = "[";
  for (std::size_t i = 0; i < chunks.size() && i < 8; ++i) {
    if (i) s += ',';
    s += std::to_string(chunks[i]);
  }
  if (chunks.size() > 8) s += ",...";
  return s + "]";
}

struct Pending {  // the value a (rank, chunk) will hold after the current round
  TransferOp op;
  SetPtr copied;                     // op == copy: shares the source's set
  std::shared_ptr<RankSet> reduced;  // op == reduce: a new union being built
};

class Verifier {
 public:
  explicit Verifier(const Schedule& s) : s_(s) {}

  VerifyReport run() {
    VerifyReport rep;
    if (!check_header(rep)) return rep;
    init_state();
    for (std::size_t pi = 0; pi < s_.phases.size(); ++pi) {
      const Phase& phase = s_.phases[pi];
      rep.rounds_per_phase.push_back(static_cast<int>(phase.rounds.size()));
      for (std::size_t ri = 0; ri < phase.rounds.size(); ++ri) {
        std::string err = run_round(phase, pi, ri);
        if (!err.empty()) {
          rep.message = err;
          return rep;
        }
        const double cost = round_beta_cost(phase.rounds[ri]);
        rep.beta_cost_total += cost;
        if (phase.waits_for_straggler) rep.beta_cost_waiting += cost;
      }
    }
    rep.message = check_complete();
    rep.ok = rep.message.empty();
    return rep;
  }

 private:
  bool check_header(VerifyReport& rep) {
    const int n = s_.nranks;
    auto bad = [&](const std::string& m) { rep.message = m; return false; };
    if (n < 2) return bad("nranks = " + std::to_string(n) + ", expected at least 2");
    if (s_.nchunks < 1) return bad("nchunks = " + std::to_string(s_.nchunks) + ", expected at least 1");
    if (s_.ports != 1 && s_.ports != kAllPorts)
      return bad("ports = " + std::to_string(s_.ports) + ", expected 1 or all");
    if (s_.straggler && (*s_.straggler < 0 || *s_.straggler >= n))
      return bad("straggler = " + std::to_string(*s_.straggler) + ", expected a rank in [0, " + std::to_string(n) + ")");
    if (s_.straggler && !s_.stragglers.empty()) return bad("straggler and stragglers both given, expected one of them");
    for (std::size_t i = 0; i < s_.stragglers.size(); ++i) {
      const int r = s_.stragglers[i];
      if (r < 0 || r >= n)
        return bad("stragglers[" + std::to_string(i) + "] = " + std::to_string(r) + ", expected a rank in [0, " +
                   std::to_string(n) + ")");
      if (i > 0 && r <= s_.stragglers[i - 1]) return bad("stragglers not strictly ascending");
    }
    return true;
  }

  void init_state() {
    const int n = s_.nranks;
    state_.assign(static_cast<std::size_t>(n) * s_.nchunks, nullptr);
    for (int r = 0; r < n; ++r) {
      auto own = std::make_shared<RankSet>(n);
      own->insert(r);
      for (int c = 0; c < s_.nchunks; ++c) at(r, c) = own;
    }
  }

  SetPtr& at(int rank, int chunk) {
    return state_[static_cast<std::size_t>(rank) * s_.nchunks + chunk];
  }

  std::string run_round(const Phase& phase, std::size_t pi, std::size_t ri) {
    const int n = s_.nranks;
    const Round& round = phase.rounds[ri];
    std::vector<int> sends(n, 0), recvs(n, 0);
    std::unordered_map<std::uint64_t, Pending> pending;
    for (std::size_t ti = 0; ti < round.size(); ++ti) {
      const Transfer& t = round[ti];
      std::ostringstream where;
      where << "phase '" << phase.name << "' (" << pi << ") round " << ri << " transfer " << ti << " ("
            << t.src << "->" << t.dst << " " << to_string(t.op) << " chunks " << chunk_list(t.chunks) << "): ";
      auto err = [&](const std::string& m) { return where.str() + m; };
      if (t.src < 0 || t.src >= n || t.dst < 0 || t.dst >= n)
        return err("rank out of range [0, " + std::to_string(n) + ")");
      if (t.src == t.dst) return err("a rank cannot send to itself");
      if (t.chunks.empty()) return err("no chunks");
      if (!phase.waits_for_straggler) {
        const std::vector<int> late = s_.late_ranks();  // one straggler or a set
        if (late.empty()) return err("phase does not wait for the straggler but the schedule names none");
        const bool src_late = std::find(late.begin(), late.end(), t.src) != late.end();
        if (src_late || std::find(late.begin(), late.end(), t.dst) != late.end())
          return err("straggler " + std::to_string(src_late ? t.src : t.dst) +
                     " takes part in a phase that does not wait for it");
      }
      if (s_.ports == 1) {
        if (++sends[t.src] > 1) return err("port violation: rank " + std::to_string(t.src) + " sends twice in one round (ports = 1)");
        if (++recvs[t.dst] > 1) return err("port violation: rank " + std::to_string(t.dst) + " receives twice in one round (ports = 1)");
      }
      for (std::size_t k = 0; k < t.chunks.size(); ++k) {
        const int c = t.chunks[k];
        if (c < 0 || c >= s_.nchunks)
          return err("chunk " + std::to_string(c) + " out of range [0, " + std::to_string(s_.nchunks) + ")");
        if (k > 0 && c <= t.chunks[k - 1]) return err("chunk list not strictly ascending");
        const SetPtr& src = at(t.src, c);
        const std::uint64_t key = static_cast<std::uint64_t>(t.dst) * static_cast<std::uint64_t>(s_.nchunks) + c;
        auto it = pending.find(key);
        if (it != pending.end() && (it->second.op == TransferOp::copy || t.op == TransferOp::copy))
          return err("rank " + std::to_string(t.dst) + " chunk " + std::to_string(c) +
                     " is written by two transfers in one round and one of them is a copy");
        if (t.op == TransferOp::copy) {
          pending.emplace(key, Pending{TransferOp::copy, src, nullptr});
          continue;
        }
        if (it == pending.end())
          it = pending.emplace(key, Pending{TransferOp::reduce, nullptr, std::make_shared<RankSet>(*at(t.dst, c))}).first;
        RankSet& building = *it->second.reduced;
        if (building.intersects(*src)) {
          RankSet overlap(n);  // name the contributions present on both sides
          for (int r = 0; r < n; ++r)
            if (src->contains(r) && building.contains(r)) overlap.insert(r);
          return err("double counting: rank " + std::to_string(t.dst) + " chunk " + std::to_string(c) +
                     " already holds the contributions of ranks " + overlap.describe());
        }
        building.unite(*src);
      }
    }
    for (auto& [key, p] : pending) {
      const int dst = static_cast<int>(key / static_cast<std::uint64_t>(s_.nchunks));
      const int c = static_cast<int>(key % static_cast<std::uint64_t>(s_.nchunks));
      if (p.op == TransferOp::copy) at(dst, c) = std::move(p.copied);
      else at(dst, c) = std::move(p.reduced);
    }
    return "";
  }

  double round_beta_cost(const Round& round) const {
    std::unordered_map<int, long long> sent, received;
    long long most = 0;
    for (const Transfer& t : round) {
      const long long k = static_cast<long long>(t.chunks.size());
      most = std::max({most, sent[t.src] += k, received[t.dst] += k});
    }
    return static_cast<double>(most) / s_.nchunks;
  }

  std::string check_complete() {
    for (int r = 0; r < s_.nranks; ++r)
      for (int c = 0; c < s_.nchunks; ++c) {
        const RankSet& set = *at(r, c);
        if (set.count() != s_.nranks)
          return "incomplete result: after the last round rank " + std::to_string(r) + " chunk " +
                 std::to_string(c) + " lacks the contributions of ranks " + set.describe(true);
      }
    return "";
  }

  const Schedule& s_;
  std::vector<SetPtr> state_;
};

}  // namespace reference_detail

inline VerifyReport verify(const Schedule& s) { return reference_detail::Verifier(s).run(); }

}  // namespace stragglar::reference
