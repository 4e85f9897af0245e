// The verifier on a PackedSchedule (internal; the public verify() on a Schedule is the same
// code, see verify.cpp and docs/verification.md).
#pragma once
#include <string>

#include "schedule/packed_schedule.hpp"
#include "stragglar/verify.hpp"

namespace stragglar::detail {

// The verifier keeps a rank and two flags in 32 bits per (transfer, chunk): ranks below 2^15.
inline constexpr int kMaxVerifiedRanks = 1 << 15;

// threads = 0: one per core (at most 4) for a million transfers or more, else one; tests force
// several on small schedules so that the parts' seams are checked.
VerifyReport verify(const PackedSchedule& s, int threads = 0);
VerifyReport verify(const Schedule& s, int threads);
// Throws Error(InvalidSchedule) with the report's message, as stragglar::verify_or_throw does.
void verify_or_throw(const PackedSchedule& s);
std::string summary(const PackedSchedule& s, const VerifyReport& r);

}  // namespace stragglar::detail
