// The signature of a configuration's first call (config_signature.hpp).
#include "runtime/config_signature.hpp"

#include <climits>
#include <cstring>

#include "stragglar/algorithm.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {
namespace {

// Slots of the agreed vector: [0, F) the fields, [F, 2F) their negations, then the extras.
constexpr std::size_t kF = kSignatureFields;
constexpr std::size_t kFailingRank = 2 * kF;      // max of -rank: the lowest rank that failed
constexpr std::size_t kTag = kFailingRank + 1;    // max of every rank's next free tag
constexpr std::size_t kWarmUpMissing = kTag + 1;  // max of "lacks the warm-up memory"
static_assert(kWarmUpMissing + 1 == kSignatureValues);

constexpr std::array<const char*, kF> kFieldNames = {
    "ok",     "algorithm", "straggler", "pipeline", "pipeline (resolved K)", "count", "dtype", "op",
    "phases", "cost model (auto decides from it: pass the same Options::cost / STRAGGLAR_* model)",
    "stragglers (a fingerprint of the set)"};

std::size_t index(SignatureField f) { return static_cast<std::size_t>(f); }

}  // namespace

SignatureValues encode_signature(const ConfigSignature& mine, const SignatureExtras& extras) {
  SignatureValues v{};
  for (std::size_t i = 0; i < kF; ++i) {
    v[i] = mine.fields[i];
    v[kF + i] = -mine.fields[i];
  }
  v[kFailingRank] = extras.failed ? -static_cast<std::int64_t>(extras.rank) : -std::int64_t{INT_MAX};
  v[kTag] = extras.next_tag;
  v[kWarmUpMissing] = extras.warm_up_memory ? 0 : 1;
  return v;
}

AgreedSignature decode_signature(std::span<const std::int64_t, kSignatureValues> v) {
  AgreedSignature a;
  a.every_rank_ok = -v[kF + index(SignatureField::ok)] != 0;
  a.failing_rank = v[kFailingRank] == -std::int64_t{INT_MAX} ? -1 : static_cast<int>(-v[kFailingRank]);
  a.tag = v[kTag];
  a.warm_up_memory = v[kWarmUpMissing] == 0;
  for (std::size_t i = index(SignatureField::algorithm); i < kF; ++i) {
    const std::int64_t hi = v[i], lo = -v[kF + i];
    if (hi != lo) {
      a.mismatch = true;
      a.field = static_cast<SignatureField>(i);
      a.lowest = lo;
      a.highest = hi;
      break;
    }
  }
  return a;
}

std::string signature_value_text(SignatureField field, std::int64_t v) {
  const bool small = v >= 0 && v < 1000;
  switch (field) {
    case SignatureField::algorithm:
      if (small) {
        const char* name = to_string(static_cast<Algorithm>(v));
        if (name[0] != '?') return name;
      }
      break;
    case SignatureField::dtype:
      if (small && v <= static_cast<int>(DataType::int64)) return to_string(static_cast<DataType>(v));
      break;
    case SignatureField::op:
      if (small && v <= static_cast<int>(ReduceOp::avg)) return to_string(static_cast<ReduceOp>(v));
      break;
    case SignatureField::pipeline:
      if (v == kPipelineAuto) return "auto";
      break;
    case SignatureField::phases:
      if (small && v <= 2) return v == 0 ? "all" : v == 1 ? "no_wait_only" : "waiting_only";
      break;
    default:
      break;
  }
  return std::to_string(v);
}

std::string signature_mismatch_text(const char* api, const AgreedSignature& a, const ConfigSignature& mine, int rank) {
  return std::string(api) + ": ranks disagree on " + kFieldNames[index(a.field)] + ": values range from " +
         signature_value_text(a.field, a.lowest) + " to " + signature_value_text(a.field, a.highest) + " (rank " +
         std::to_string(rank) + " passed " + signature_value_text(a.field, mine[a.field]) +
         "); every rank must pass the same arguments";
}

std::int64_t cost_fingerprint(const CostModel& c) {
  std::uint64_t h = 1469598103934665603ull;
  for (double d : {c.alpha_s, c.beta_s_per_byte, c.gamma_s_per_byte}) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return static_cast<std::int64_t>(h >> 1);
}

}  // namespace stragglar::detail
