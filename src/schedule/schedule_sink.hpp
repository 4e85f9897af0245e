// A schedule handed over round by round (internal, not installed).
//
// At n = 4096 a StragglAR schedule has 33.5 million transfers: 1.6 GB as a Schedule (48 bytes a
// transfer). A synthesizer, the JSON reader or a stored schedule can instead pass its rounds to
// a sink one at a time, and a consumer that packs them (PackedSchedule, ~8 bytes a transfer),
// writes JSON or relabels them never holds the whole Schedule.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "stragglar/schedule.hpp"

namespace stragglar::detail {

// Everything of a Schedule but its phases.
struct ScheduleHeader {
  std::string algorithm;
  int nranks = 0;
  std::optional<int> straggler;
  int nchunks = 0;
  int ports = 1;
  std::vector<int> stragglers;  // Schedule::stragglers (several late ranks), ascending
};

// Calls: begin, then per phase begin_phase and its rounds, then end.
class ScheduleSink {
 public:
  virtual ~ScheduleSink() = default;
  virtual void begin(const ScheduleHeader& header) = 0;
  virtual void begin_phase(const std::string& name, bool waits_for_straggler) = 0;
  // One round of the current phase. The sink may take the transfers (move from `round`); the
  // caller clears it before reusing it.
  virtual void add_round(Round& round) = 0;
  virtual void end() = 0;
};

// Builds a Schedule.
class ScheduleCollector final : public ScheduleSink {
 public:
  void begin(const ScheduleHeader& header) override;
  void begin_phase(const std::string& name, bool waits_for_straggler) override;
  void add_round(Round& round) override;
  void end() override {}
  Schedule take() { return std::move(schedule_); }

 private:
  Schedule schedule_;
};

// Renames ranks on the way to `next`: rank r becomes perm[r], as relabel() does to a whole
// Schedule (same checks, same result), without a second copy of the schedule.
class RelabelingSink final : public ScheduleSink {
 public:
  RelabelingSink(const std::vector<int>& perm, ScheduleSink& next) : perm_(perm), next_(next) {}
  void begin(const ScheduleHeader& header) override;
  void begin_phase(const std::string& name, bool waits_for_straggler) override {
    next_.begin_phase(name, waits_for_straggler);
  }
  void add_round(Round& round) override;
  void end() override { next_.end(); }

 private:
  const std::vector<int>& perm_;
  ScheduleSink& next_;
};

// Hands a whole Schedule to a sink (its rounds are copied, `s` is unchanged).
void emit(const Schedule& s, ScheduleSink& out);

}  // namespace stragglar::detail
