// The signature of a configuration's first call (docs/runtime.md, "Arguments" in the rules):
// what every rank must pass alike, whether its call could be prepared, and what the ranks
// settle in the same agreement — encoded for one element-wise max over ranks (Engine::agree_max),
// decoded, and turned into the error every rank raises when the ranks disagree.
//
// The max of (v, -v) gives every rank the largest and the smallest value of each field, so one
// agreement tells every rank whether all passed the same; besides the fields it carries the
// lowest rank that failed, the next tag no rank has used, and whether every rank has the
// memory for auto's warm-ups of native (AutoHost::warm_up_native: all warm up, or none).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "stragglar/cost_model.hpp"

namespace stragglar::detail {

// The fields, in the order they are compared (the first that differs is the one named).
enum class SignatureField : int {
  ok,          // 1: this rank's arguments and set-up are valid; 0: it raised (its own error)
  algorithm,
  straggler,   // as requested, -1 resolved to n-1
  pipeline,    // as requested (kPipelineAuto: "auto")
  resolved_k,  // the pipeline the cost model chose
  count,
  dtype,
  op,
  phases,
  cost,        // auto's cost model (cost_fingerprint), 0 for the other algorithms
  stragglers,  // late_set_fingerprint(Options::stragglers) >> 2 (so that -v cannot overflow)
};
constexpr std::size_t kSignatureFields = static_cast<std::size_t>(SignatureField::stragglers) + 1;

// One rank's signature: field values as integers (SignatureField order).
struct ConfigSignature {
  std::array<std::int64_t, kSignatureFields> fields{};
  std::int64_t& operator[](SignatureField f) { return fields[static_cast<std::size_t>(f)]; }
  std::int64_t operator[](SignatureField f) const { return fields[static_cast<std::size_t>(f)]; }
};

// What a rank contributes besides its fields.
struct SignatureExtras {
  int rank = 0;
  bool failed = false;           // this rank's preparation raised
  std::int64_t next_tag = 1;     // the first tag this rank has not used
  bool warm_up_memory = true;    // this rank holds the memory auto's warm-ups need (or needs none)
};

// The vector one agree_max runs on.
constexpr std::size_t kSignatureValues = 2 * kSignatureFields + 3;
using SignatureValues = std::array<std::int64_t, kSignatureValues>;

SignatureValues encode_signature(const ConfigSignature& mine, const SignatureExtras& extras);

// What every rank reads from the agreed vector (the same on every rank).
struct AgreedSignature {
  bool every_rank_ok = true;
  int failing_rank = -1;          // the lowest rank whose preparation raised, -1: none
  std::int64_t tag = 1;           // the largest next_tag: unused on every rank
  bool warm_up_memory = true;     // every rank holds auto's warm-up memory
  // The first field (after ok) on which ranks differ, with its range; mismatch false: none.
  bool mismatch = false;
  SignatureField field = SignatureField::ok;
  std::int64_t lowest = 0, highest = 0;
};

AgreedSignature decode_signature(std::span<const std::int64_t, kSignatureValues> agreed);

// A field's value as the user wrote it ("ring", "float", "sum", "auto"), else the number.
std::string signature_value_text(SignatureField field, std::int64_t value);

// The mismatch error's text: which field, the range over ranks, what this rank passed.
std::string signature_mismatch_text(const char* api, const AgreedSignature& agreed, const ConfigSignature& mine,
                                    int rank);

// The cost model's bits, folded: auto's predictions must be the same on every rank.
std::int64_t cost_fingerprint(const CostModel& c);

}  // namespace stragglar::detail
