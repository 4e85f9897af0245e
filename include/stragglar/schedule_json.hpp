// JSON form of a schedule, format "stragglar-schedule/1" (a public interface: see README).
#pragma once
#include <string>

#include "stragglar/schedule.hpp"

namespace stragglar {

inline constexpr const char* kScheduleFormat = "stragglar-schedule/1";

// Compact (indent < 0) or pretty JSON text. Round-trips exactly through schedule_from_json.
std::string schedule_to_json(const Schedule& s, int indent = -1);

// Parses and checks the structure (types, ranges, consistency of nranks/nchunks/straggler);
// throws Error(InvalidSchedule) naming the offending field. It does not run the verifier.
Schedule schedule_from_json(const std::string& text);

}  // namespace stragglar
