// What one call of auto runs: the vocabulary every stage of the policy shares.
#pragma once
#include <algorithm>
#include <span>
#include <string>

#include "stragglar/algorithm.hpp"

namespace stragglar::detail {

struct Choice {
  Algorithm algorithm = Algorithm::ring;  // a candidate of the policy
  int straggler = -1;  // algorithms that single out a straggler (stragglar): the rank treated as late
  // stragglar-k and hierarchical: the late set they are told, ascending. Points into the policy's
  // table of learned sets (which never changes a set once learned), so a Choice is copied without
  // allocating; empty for every other algorithm.
  std::span<const int> late = {};
  bool operator==(const Choice& o) const {
    return algorithm == o.algorithm && straggler == o.straggler &&
           std::equal(late.begin(), late.end(), o.late.begin(), o.late.end());
  }
};
// stragglar-k and hierarchical: told a set of late ranks rather than one straggler.
inline bool uses_late_set(Algorithm a) noexcept { return a == Algorithm::stragglar_k || a == Algorithm::hierarchical; }
// "stragglar(straggler 7)", "stragglar-k(late 6,7)", "rhd", "native".
std::string to_string(const Choice& c);

}  // namespace stragglar::detail
