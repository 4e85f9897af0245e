// auto's texts: why the choice changed (STRAGGLAR_DEBUG=INFO, PolicyConfig::keep_evidence) and
// what each decision saw and planned (STRAGGLAR_DEBUG=TRACE, keep_trace). Built only when asked
// for: they allocate.
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "runtime/auto/estimator.hpp"

namespace stragglar::detail::auto_policy {

class LateDetector;

std::string ms(double s);     // "12.345 ms"
std::string fmt_g(double v);  // "%g"

// What a decision covered and saw.
struct DecisionView {
  std::int64_t first, last;  // its calls
  const LateDetector& detector;
  const Estimator& estimator;
  const Targets& targets;
};

// " stragglar 84.250 ms (1 fresh of 2, model 80.100 ms), ring ...": every candidate's estimate,
// the measurements behind it and the model's prediction.
void append_estimates(std::string& out, const Estimator& est, const Targets& t);
// "after call 41: rhd -> stragglar(straggler 2): <reason>; calls 41..41: rank 2 arrived last in ...".
// An empty reason: the late set or the straggler moved.
std::string switch_evidence(const DecisionView& v, const Choice& from, const Choice& to, std::string reason,
                            int old_target, bool set_changed);
// "calls 5..5: incumbent ..., next exploration [...], late rank ..., estimates: ...".
std::string decision_trace(const DecisionView& v, const Choice& incumbent, std::span<const int> probes, int window_calls,
                           bool shared_clock);

}  // namespace stragglar::detail::auto_policy
