// Random, reproducible damage to a schedule: the inputs of the verifier's differential test and
// of the fuzz test (tests/fuzz). Each mutation is one a hand-written or corrupted schedule file
// could carry: ranks and chunks out of range or repeated, transfers dropped, doubled or moved,
// rounds reordered, headers that disagree with the body.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "stragglar/schedule.hpp"

namespace stragglar::testing {

// splitmix64: the same numbers on every platform (std distributions are not).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : x_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (x_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (hi >= lo), up to a negligible bias.
  int range(int lo, int hi) {
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(static_cast<long long>(hi) - lo + 1));
  }
  bool chance(int percent) { return range(0, 99) < percent; }

 private:
  std::uint64_t x_;
};

// A random transfer slot (phase, round, index), if the schedule has one.
inline std::optional<std::pair<Round*, std::size_t>> pick_transfer(Schedule& s, Rng& rng) {
  std::vector<Round*> rounds;
  for (Phase& p : s.phases)
    for (Round& r : p.rounds)
      if (!r.empty()) rounds.push_back(&r);
  if (rounds.empty()) return std::nullopt;
  Round* r = rounds[static_cast<std::size_t>(rng.range(0, static_cast<int>(rounds.size()) - 1))];
  return std::make_pair(r, static_cast<std::size_t>(rng.range(0, static_cast<int>(r->size()) - 1)));
}

inline Round* pick_round(Schedule& s, Rng& rng) {
  std::vector<Round*> rounds;
  for (Phase& p : s.phases)
    for (Round& r : p.rounds) rounds.push_back(&r);
  if (rounds.empty()) return nullptr;
  return rounds[static_cast<std::size_t>(rng.range(0, static_cast<int>(rounds.size()) - 1))];
}

// Applies one random mutation.
inline void mutate_once(Schedule& s, Rng& rng) {
  const int n = std::max(2, s.nranks), nc = std::max(1, s.nchunks);  // earlier mutations may have broken them
  switch (rng.range(0, 17)) {
    case 0:  // a rank, sometimes out of range
      if (auto t = pick_transfer(s, rng)) {
        Transfer& x = (*t->first)[t->second];
        (rng.chance(50) ? x.src : x.dst) = rng.chance(80) ? rng.range(0, n - 1) : rng.range(-2, n + 2);
      }
      break;
    case 1:  // a chunk, sometimes out of range
      if (auto t = pick_transfer(s, rng)) {
        Transfer& x = (*t->first)[t->second];
        if (!x.chunks.empty())
          x.chunks[static_cast<std::size_t>(rng.range(0, static_cast<int>(x.chunks.size()) - 1))] =
              rng.chance(80) ? rng.range(0, nc - 1) : rng.range(-2, nc + 2);
      }
      break;
    case 2:  // the op
      if (auto t = pick_transfer(s, rng)) {
        Transfer& x = (*t->first)[t->second];
        x.op = x.op == TransferOp::copy ? TransferOp::reduce : TransferOp::copy;
      }
      break;
    case 3:  // drop a transfer
      if (auto t = pick_transfer(s, rng)) t->first->erase(t->first->begin() + static_cast<std::ptrdiff_t>(t->second));
      break;
    case 4:  // the same transfer again, in its round or another
      if (auto t = pick_transfer(s, rng)) {
        const Transfer copy = (*t->first)[t->second];
        Round* into = rng.chance(50) ? t->first : pick_round(s, rng);
        if (into) into->insert(into->begin() + rng.range(0, static_cast<int>(into->size())), copy);
      }
      break;
    case 5:  // move a transfer to another round
      if (auto t = pick_transfer(s, rng)) {
        const Transfer moved = (*t->first)[t->second];
        t->first->erase(t->first->begin() + static_cast<std::ptrdiff_t>(t->second));
        if (Round* into = pick_round(s, rng)) into->push_back(moved);
      }
      break;
    case 6:  // swap two rounds of a phase
      if (!s.phases.empty()) {
        Phase& p = s.phases[static_cast<std::size_t>(rng.range(0, static_cast<int>(s.phases.size()) - 1))];
        if (p.rounds.size() >= 2) {
          const int a = rng.range(0, static_cast<int>(p.rounds.size()) - 1);
          const int b = rng.range(0, static_cast<int>(p.rounds.size()) - 1);
          std::swap(p.rounds[static_cast<std::size_t>(a)], p.rounds[static_cast<std::size_t>(b)]);
        }
      }
      break;
    case 7:  // drop a round
      if (!s.phases.empty()) {
        Phase& p = s.phases[static_cast<std::size_t>(rng.range(0, static_cast<int>(s.phases.size()) - 1))];
        if (!p.rounds.empty()) p.rounds.erase(p.rounds.begin() + rng.range(0, static_cast<int>(p.rounds.size()) - 1));
      }
      break;
    case 8:  // a round twice, or an empty one
      if (!s.phases.empty()) {
        Phase& p = s.phases[static_cast<std::size_t>(rng.range(0, static_cast<int>(s.phases.size()) - 1))];
        const int at = rng.range(0, static_cast<int>(p.rounds.size()));
        Round extra;
        if (!p.rounds.empty() && rng.chance(70)) extra = p.rounds[static_cast<std::size_t>(rng.range(0, static_cast<int>(p.rounds.size()) - 1))];
        p.rounds.insert(p.rounds.begin() + at, extra);
      }
      break;
    case 9:  // the straggler rule
      if (!s.phases.empty()) {
        Phase& p = s.phases[static_cast<std::size_t>(rng.range(0, static_cast<int>(s.phases.size()) - 1))];
        p.waits_for_straggler = !p.waits_for_straggler;
      }
      break;
    case 10:  // the straggler
      if (rng.chance(30)) s.straggler.reset();
      else s.straggler = rng.chance(80) ? rng.range(0, n - 1) : rng.range(-1, n + 1);
      break;
    case 11:  // nchunks disagrees with the body
      s.nchunks = rng.chance(50) ? nc + rng.range(-1, 1) : rng.range(0, nc + 3);
      break;
    case 12:  // nranks disagrees with the body
      s.nranks = n + rng.range(-1, 1);
      break;
    case 13:  // ports
      s.ports = rng.chance(45) ? 1 : rng.chance(80) ? kAllPorts : rng.range(-1, 3);
      break;
    case 14:  // a chunk list out of order, repeated, empty or longer
      if (auto t = pick_transfer(s, rng)) {
        Transfer& x = (*t->first)[t->second];
        std::vector<int> c(x.chunks.begin(), x.chunks.end());
        switch (rng.range(0, 3)) {
          case 0: if (c.size() >= 2) std::swap(c.front(), c.back()); break;
          case 1: if (!c.empty()) c.push_back(c.back()); break;
          case 2: c.clear(); break;
          default: c.push_back(rng.range(0, nc)); break;
        }
        x.chunks = c;
      }
      break;
    case 15:  // a random transfer
      if (Round* r = pick_round(s, rng)) {
        Transfer x;
        x.src = rng.range(0, n - 1);
        x.dst = rng.range(0, n - 1);
        const int k = rng.range(1, 3);
        for (int i = 0, c = rng.range(0, nc - 1); i < k && c < nc; ++i, c += rng.range(1, 3)) x.chunks.push_back(c);
        x.op = rng.chance(50) ? TransferOp::copy : TransferOp::reduce;
        r->push_back(x);
      }
      break;
    case 16:  // swap the two ends of a transfer
      if (auto t = pick_transfer(s, rng)) {
        Transfer& x = (*t->first)[t->second];
        std::swap(x.src, x.dst);
      }
      break;
    default:  // drop a phase
      if (!s.phases.empty() && rng.chance(30)) s.phases.erase(s.phases.begin() + rng.range(0, static_cast<int>(s.phases.size()) - 1));
      break;
  }
}

inline void mutate(Schedule& s, Rng& rng, int times) {
  for (int i = 0; i < times; ++i) mutate_once(s, rng);
}

}  // namespace stragglar::testing
