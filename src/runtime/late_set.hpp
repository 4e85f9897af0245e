// Several late ranks in Options (internal): the checks and the per-call key part
// shared by schedule_for and the runtime core. Implemented in options.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "stragglar/options.hpp"

namespace stragglar::detail {

// The ascending late set a call with `o` runs with: empty when the set changes nothing (none
// given, or an algorithm that singles out nobody), one rank (the straggler), or 2..n/2 ranks
// for stragglar-k. Throws Error(InvalidUsage), prefixed with `api`, for a rank out of range, a
// rank given twice, too many ranks, or several for an algorithm that handles one.
std::vector<int> late_set_of(const Options& o, int nranks, const std::string& api);

// A fingerprint of o.stragglers that does not depend on their order (0 for none): the per-call
// configuration key and the cross-rank agreement carry it instead of the set.
std::uint64_t late_set_fingerprint(const std::vector<int>& stragglers) noexcept;

}  // namespace stragglar::detail
