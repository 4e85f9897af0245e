// The schedule model: a schedule is data (docs/design.md "The spine").
//
// A buffer of `count` elements is cut into `nchunks` near-equal chunks. A schedule is a list of
// phases; a phase is a list of rounds; a round is a set of transfers {src, dst, chunks, op}.
// All transfers of a round read the state from before the round. Initially rank r holds only
// its own contribution to every chunk; at the end every rank holds the sum over all ranks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stragglar/chunk_list.hpp"

namespace stragglar {

// reduce: dst[c] = dst[c] (+) src[c];  copy: dst[c] = src[c].
enum class TransferOp : std::uint8_t { reduce, copy };
const char* to_string(TransferOp op) noexcept;

struct Transfer {
  int src = 0;
  int dst = 0;
  ChunkList chunks;  // chunk indices in [0, nchunks), ascending
  TransferOp op = TransferOp::reduce;
  bool operator==(const Transfer&) const = default;
};

using Round = std::vector<Transfer>;

struct Phase {
  std::string name;
  // false: the phase never involves the straggler and may run during its delay
  // (StragglAR's ReduceScatter among the n-1 others, paper §3 "Precondition").
  bool waits_for_straggler = true;
  std::vector<Round> rounds;
  bool operator==(const Phase&) const = default;
};

// `ports`: 1 = single-port model (paper §3: per round a rank sends at most one transfer and
// receives at most one); kAllPorts = any number, bandwidth split among them (MSCCL allpairs).
inline constexpr int kAllPorts = 0;

struct Schedule {
  std::string algorithm;
  int nranks = 0;
  std::optional<int> straggler;  // nullopt for algorithms that single none out
  // Several late ranks (StragglAR-k): the whole set, ascending, and then `straggler`
  // is nullopt. Empty when the schedule singles out one rank or none. JSON: "stragglers": [...].
  std::vector<int> stragglers;
  int nchunks = 0;
  int ports = 1;
  std::vector<Phase> phases;

  // The late ranks the schedule names: `stragglers`, else {straggler}, else {}.
  std::vector<int> late_ranks() const;

  int total_rounds() const;
  // Rounds of the phases that wait for the straggler (the exposed part in the ideal case).
  int waiting_rounds() const;
  bool operator==(const Schedule&) const = default;
};

// Element range [begin, end) of chunk `chunk` when `count` elements are cut into `nchunks`
// near-equal chunks: the first count % nchunks chunks hold one element more. Chunks may be
// empty when count < nchunks; the runtime then simply moves zero bytes.
struct ElementRange {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};
ElementRange chunk_range(std::size_t count, int nchunks, int chunk);

// Renames ranks: rank r of `s` becomes perm[r]. Used to move the straggler (synthesized at
// n-1) to any rank; the schedule stays valid because the model is symmetric in rank names.
// Taken by value: pass std::move(s) to rename in place (synthesis does, saving a copy).
Schedule relabel(Schedule s, const std::vector<int>& perm);

}  // namespace stragglar
