// Reading stragglar-schedule/1 JSON without a document in memory (internal).
#pragma once
#include <cstdio>

#include "schedule/packed_schedule.hpp"

namespace stragglar::detail {

// Reads the JSON in `in` (from its current position to the end) with nlohmann's SAX parser
// straight into `out`, when the document has the shape this library writes: the header fields
// before "phases", each once; "name" and "waits_for_straggler" before "rounds"; every value of
// the expected type and range. Returns false as soon as it meets anything else (another key
// order, a duplicate or unknown key, a wrong type or value, malformed JSON); the caller then
// reads the document with schedule_from_json, whose answer (a Schedule or its error) is the
// authority — so the two readers never disagree (the fuzz test checks it).
bool read_packed_json(std::FILE* in, PackedScheduleBuilder& out);

}  // namespace stragglar::detail
