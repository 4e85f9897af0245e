// JSON form of a schedule, format "stragglar-schedule/1" (a public interface: see README).
#pragma once
#include <iosfwd>
#include <string>

#include "stragglar/algorithm.hpp"
#include "stragglar/schedule.hpp"

namespace stragglar {

inline constexpr const char* kScheduleFormat = "stragglar-schedule/1";

// Compact (indent < 0) or pretty JSON text. Round-trips exactly through schedule_from_json.
std::string schedule_to_json(const Schedule& s, int indent = -1);

// Parses and checks the structure (types, ranges, consistency of nranks/nchunks/straggler);
// throws Error(InvalidSchedule) naming the offending field. It does not run the verifier.
Schedule schedule_from_json(const std::string& text);

// Streaming forms for schedules too large for a document in memory (StragglAR at
// n = 4096 is 1.8 GB of JSON). The text is byte for byte schedule_to_json's.
//
// Writes `s` to `out` as it goes (no document is built).
void write_schedule_json(std::ostream& out, const Schedule& s, int indent = -1);
// synthesize(algo, nranks, opts) written to `out` round by round: StragglAR never exists whole in
// memory (other algorithms are synthesized whole, then written). Same errors as synthesize();
// Error(InvalidUsage) when `out` fails.
void synthesize_json(std::ostream& out, Algorithm algo, int nranks, const SynthOptions& opts, int indent = -1);

}  // namespace stragglar
