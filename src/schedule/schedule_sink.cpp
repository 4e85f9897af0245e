#include "schedule/schedule_sink.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "stragglar/error.hpp"

namespace stragglar::detail {

void ScheduleCollector::begin(const ScheduleHeader& header) {
  schedule_ = Schedule{};
  schedule_.algorithm = header.algorithm;
  schedule_.nranks = header.nranks;
  schedule_.straggler = header.straggler;
  schedule_.nchunks = header.nchunks;
  schedule_.ports = header.ports;
  schedule_.stragglers = header.stragglers;
}

void ScheduleCollector::begin_phase(const std::string& name, bool waits_for_straggler) {
  schedule_.phases.push_back(Phase{name, waits_for_straggler, {}});
}

void ScheduleCollector::add_round(Round& round) {
  if (schedule_.phases.empty())
    throw Error(ErrorCode::Internal, "ScheduleCollector: a round before any phase");
  schedule_.phases.back().rounds.push_back(std::move(round));
}

void RelabelingSink::begin(const ScheduleHeader& header) {
  // The checks of relabel() (schedule.cpp), with its messages.
  require(static_cast<int>(perm_.size()) == header.nranks,
          "relabel: permutation has " + std::to_string(perm_.size()) + " entries, expected nranks = " +
              std::to_string(header.nranks));
  std::vector<bool> seen(perm_.size(), false);
  for (int p : perm_) {
    require(p >= 0 && p < header.nranks && !seen[static_cast<std::size_t>(p)],
            "relabel: entry " + std::to_string(p) + " is not a permutation of [0, " + std::to_string(header.nranks) + ")");
    seen[static_cast<std::size_t>(p)] = true;
  }
  ScheduleHeader renamed = header;
  if (renamed.straggler) {
    const int s = *renamed.straggler;
    if (s < 0 || s >= header.nranks)
      require(false, "relabel: straggler " + std::to_string(s) + " out of range, expected 0.." +
                         std::to_string(header.nranks - 1));
    renamed.straggler = perm_[static_cast<std::size_t>(s)];
  }
  for (int& s : renamed.stragglers) {
    if (s < 0 || s >= header.nranks)
      require(false, "relabel: straggler " + std::to_string(s) + " out of range, expected 0.." +
                         std::to_string(header.nranks - 1));
    s = perm_[static_cast<std::size_t>(s)];
  }
  std::sort(renamed.stragglers.begin(), renamed.stragglers.end());
  next_.begin(renamed);
}

void RelabelingSink::add_round(Round& round) {
  const int n = static_cast<int>(perm_.size());
  for (Transfer& t : round) {
    if (t.src < 0 || t.src >= n || t.dst < 0 || t.dst >= n)  // message built only on failure
      require(false, std::string("relabel: ") + (t.src < 0 || t.src >= n ? "src " + std::to_string(t.src)
                                                                           : "dst " + std::to_string(t.dst)) +
                         " out of range, expected 0.." + std::to_string(n - 1));
    t.src = perm_[static_cast<std::size_t>(t.src)];
    t.dst = perm_[static_cast<std::size_t>(t.dst)];
  }
  next_.add_round(round);
}

void emit(const Schedule& s, ScheduleSink& out) {
  out.begin(ScheduleHeader{s.algorithm, s.nranks, s.straggler, s.nchunks, s.ports, s.stragglers});
  Round copy;
  for (const Phase& phase : s.phases) {
    out.begin_phase(phase.name, phase.waits_for_straggler);
    for (const Round& round : phase.rounds) {
      copy.assign(round.begin(), round.end());
      out.add_round(copy);
    }
  }
  out.end();
}

}  // namespace stragglar::detail
