// The verifier: exact symbolic execution of a schedule (docs/design.md "Verifier").
// One bitset of contributing ranks per (rank, chunk); reduce of overlapping sets is double
// counting; the end state must be complete everywhere; port limits and the straggler rule of
// each phase are checked.
#pragma once
#include <string>
#include <vector>

#include "stragglar/schedule.hpp"

namespace stragglar {

struct VerifyReport {
  bool ok = false;
  std::string message;  // first violation ("phase 'x' round 3 transfer 2 (0->7): ..."), or ""
  std::vector<int> rounds_per_phase;
  // β cost in units of the buffer size s: Σ over rounds of the largest number of bytes any
  // rank sends or receives in that round, divided by s (chunks count as s/nchunks).
  double beta_cost_total = 0;
  double beta_cost_waiting = 0;  // the same over phases that wait for the straggler
};

VerifyReport verify(const Schedule& s);
// Throws Error(InvalidSchedule) with the report's message when the schedule is not valid.
void verify_or_throw(const Schedule& s);

// Verifies stragglar-schedule/1 JSON from the file at `path` ("-": standard input, spooled to a
// temporary file) without a document in memory: a streaming (SAX) reader packs the
// schedule (~8 bytes a transfer) and the verifier runs on that. A document of another shape than
// this library writes is read by schedule_from_json instead, so the answer is always the one
// schedule_from_json + verify() would give. Throws Error(InvalidSchedule) for malformed JSON (its
// message), Error(InvalidUsage) when the file cannot be opened. `summary_line`, when given,
// receives summary()'s line.
VerifyReport verify_json_file(const std::string& path, std::string* summary_line = nullptr);

// One-line summary: "stragglar n=8 straggler=7 chunks=7 ports=1: reduce_scatter 6 + allreduce 9 rounds, beta cost 1.286 s (exposed 1.286 s)"
std::string summary(const Schedule& s, const VerifyReport& r);

}  // namespace stragglar
