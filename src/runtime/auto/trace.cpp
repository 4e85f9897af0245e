#include "runtime/auto/trace.hpp"

#include <cmath>
#include <cstdio>

#include "runtime/auto/late_detector.hpp"

namespace stragglar::detail::auto_policy {

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  return buf;
}

std::string fmt_g(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void append_estimates(std::string& out, const Estimator& est, const Targets& t) {
  char buf[160];
  for (int k = 0; k < est.size(); ++k) {
    const Estimate& x = est.estimate(k);
    const Candidate& c = est.candidate(k);
    const char* name = stragglar::to_string(c.algorithm);
    const char* sep = k + 1 < est.size() ? "," : "";
    if (c.uses_set && !est.available(k, t)) {  // no late set to tell it yet
      std::snprintf(buf, sizeof buf, " %s not a candidate now%s", name, sep);
      out += buf;
      continue;
    }
    char value[32] = "unknown", model[32] = "no model";  // native has no schedule to simulate
    if (std::isfinite(x.value)) std::snprintf(value, sizeof value, "%.3f ms", x.value * 1e3);
    if (std::isfinite(x.predicted)) std::snprintf(model, sizeof model, "model %.3f ms", x.predicted * 1e3);
    std::snprintf(buf, sizeof buf, " %s %s (%d fresh of %zu, %s)%s", name, value, x.fresh, c.samples.size(), model, sep);
    out += buf;
  }
}

std::string switch_evidence(const DecisionView& v, const Choice& from, const Choice& to, std::string reason,
                            int old_target, bool set_changed) {
  const LateDetector& d = v.detector;
  if (reason.empty() && set_changed)
    reason = "the late set became " + to_string(Choice{Algorithm::stragglar_k, -1, d.set(d.target_set())});
  if (reason.empty())
    reason = "the straggler moved from rank " + std::to_string(old_target) + " to rank " + std::to_string(d.target());
  std::string e = "after call " + std::to_string(v.last) + ": " + to_string(from) + " -> " + to_string(to) + ": " + reason +
                  "; calls " + std::to_string(v.first) + ".." + std::to_string(v.last) + ": ";
  if (d.late_rank() >= 0)
    e += "rank " + std::to_string(d.late_rank()) + " arrived last in " + std::to_string(d.votes(d.late_rank())) +
         " of the last " + std::to_string(d.voters()) + " calls";
  else
    e += "no rank arrived last in most calls (" + std::to_string(d.significant()) + " of the last " +
         std::to_string(d.voters()) + " had a late rank)";
  if (d.late_set() >= 0)
    e += "; ranks " + to_string(Choice{Algorithm::stragglar_k, -1, d.set(d.late_set())}) + " arrived last together in " +
         std::to_string(d.late_set_votes()) + " calls, " + ms(d.delay_set_s()) + " after the others";
  e += ", median delay " + ms(d.delay_s()) + "; estimated exposed time now:";
  append_estimates(e, v.estimator, v.targets);
  return e;
}

std::string decision_trace(const DecisionView& v, const Choice& incumbent, std::span<const int> probes, int window_calls,
                           bool shared_clock) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "calls %lld..%lld: incumbent ", static_cast<long long>(v.first),
                static_cast<long long>(v.last));
  std::string out = buf;
  out += to_string(incumbent);
  out += ", next exploration [";
  for (std::size_t q = 0; q < probes.size(); ++q) {
    if (q > 0) out += ", ";
    out += to_string(v.estimator.choice_of(probes[q], v.targets));
  }
  std::snprintf(buf, sizeof buf, "], late rank %d, delay %.3f ms, noise %.1f%%, exchange every %d, exposed time %s; estimates:",
                v.detector.late_rank(), v.detector.delay_s() * 1e3, v.estimator.noise() * 100, window_calls,
                shared_clock ? "exact (one clock)" : "the shortest in-call time");
  out += buf;
  append_estimates(out, v.estimator, v.targets);
  return out;
}

}  // namespace stragglar::detail::auto_policy
