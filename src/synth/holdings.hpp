// Which non-straggler holds which full chunk, and how many hold each: the bookkeeping the
// near-power-of-two builder and the deadline builder share (stragglar_near_pow2.cpp,
// stragglar_deadline.cpp). Not installed.
//
// A round's receipts are recorded with receive() and take effect at end_round(): every transfer
// of a round reads the state from before it.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace stragglar::detail {

class Holdings {
 public:
  Holdings(int ranks, int chunks)
      : chunks_(static_cast<std::size_t>(chunks)), has_(static_cast<std::size_t>(ranks) * chunks_, 0),
        holders_(chunks_, 0) {}

  bool holds(int rank, int chunk) const { return has_[at(rank, chunk)] != 0; }
  // Non-straggler holders of `chunk`.
  int holders(int chunk) const { return holders_[static_cast<std::size_t>(chunk)]; }
  // `rank` gets `chunk` in the current round.
  void receive(int rank, int chunk) { pending_.emplace_back(rank, chunk); }
  void end_round() {
    for (auto [rank, chunk] : pending_) {
      has_[at(rank, chunk)] = 1;
      ++holders_[static_cast<std::size_t>(chunk)];
    }
    pending_.clear();
  }

 private:
  std::size_t at(int rank, int chunk) const {
    return static_cast<std::size_t>(rank) * chunks_ + static_cast<std::size_t>(chunk);
  }

  std::size_t chunks_;
  std::vector<char> has_;
  std::vector<int> holders_;
  std::vector<std::pair<int, int>> pending_;
};

}  // namespace stragglar::detail
