// The algorithm table (include/stragglar/algorithm.hpp) and synthesize(): the argument checks
// shared by every algorithm, then the row's synthesizer (src/synth/<algo>.cpp).
#include <algorithm>
#include <cctype>
#include <string>

#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "synth/synth_internal.hpp"

namespace stragglar {
namespace {

Schedule ring(int n, int, const SynthOptions&) { return detail::synthesize_ring(n); }
Schedule rhd(int n, int, const SynthOptions&) { return detail::synthesize_rhd(n); }
Schedule allpairs(int n, int, const SynthOptions&) { return detail::synthesize_allpairs(n); }
Schedule broadcast(int n, int straggler, const SynthOptions&) {
  return detail::synthesize_broadcast(n, straggler);
}

Schedule stragglar_k(int n, int straggler, const SynthOptions& opts) {
  std::vector<int> late = opts.stragglers;
  if (late.empty()) late.push_back(straggler);
  std::sort(late.begin(), late.end());
  return detail::synthesize_stragglar_k(n, late, opts);
}

Schedule hierarchical(int n, int straggler, const SynthOptions& opts) {
  std::vector<int> late = opts.stragglers;
  if (late.empty()) late.push_back(straggler);
  std::sort(late.begin(), late.end());
  return detail::synthesize_hierarchical(n, late, opts);
}

constexpr std::string_view kBroadcastAliases[] = {"direct"};  // the paper's code name
constexpr std::string_view kNativeAliases[] = {"mpi", "nccl", "gloo"};
constexpr std::string_view kStragglarKAliases[] = {"stragglar_k", "stragglark"};

constexpr AlgorithmInfo kTable[] = {
    {Algorithm::stragglar, "stragglar", {}, AlgorithmKind::schedule, true, true,
     &detail::synthesize_stragglar,
     "StragglAR (paper §3): ReduceScatter among the others during the delay, then n+log2(n)-2 rounds"},
    {Algorithm::ring, "ring", {}, AlgorithmKind::schedule, false, false, &ring,
     "Ring ReduceScatter + AllGather, 2(n-1) rounds of s/n"},
    {Algorithm::rhd, "rhd", {}, AlgorithmKind::schedule, false, false, &rhd,
     "recursive halving (ReduceScatter) + doubling (AllGather), 2 log2(n) rounds"},
    {Algorithm::allpairs, "allpairs", {}, AlgorithmKind::schedule, false, false, &allpairs,
     "MSCCL allpairs: every rank exchanges with every other at once, 2 rounds"},
    {Algorithm::broadcast, "broadcast", kBroadcastAliases, AlgorithmKind::schedule, true, false,
     &broadcast, "the others AllReduce during the delay, one exchange with the straggler, a broadcast"},
    {Algorithm::stragglar_k, "stragglar-k", kStragglarKAliases, AlgorithmKind::schedule, true, true, &stragglar_k,
     "k ranks late together: ReduceScatter among the others during the delay, then each late rank "
     "sends its data to the chunks' collectors and receives final chunks"},
    {Algorithm::hierarchical, "hierarchical", {}, AlgorithmKind::schedule, true, true, &hierarchical,
     "a late host (the k late ranks are one host of k): reduce inside hosts, StragglAR across hosts, gather inside"},
    {Algorithm::native, "native", kNativeAliases, AlgorithmKind::native, false, false, nullptr,
     "the engine's own AllReduce (MPI_Allreduce, ncclAllReduce, Gloo)"},
    {Algorithm::automatic, "auto", {}, AlgorithmKind::automatic, false, false, nullptr,
     "find the straggler online and pick StragglAR, ring, rhd or native per call"},
};

}  // namespace

std::span<const AlgorithmInfo> algorithm_table() noexcept { return kTable; }

const AlgorithmInfo* find_algorithm(Algorithm a) noexcept {
  for (const AlgorithmInfo& row : kTable)
    if (row.id == a) return &row;
  return nullptr;
}

const AlgorithmInfo& algorithm_info(Algorithm a) {
  if (const AlgorithmInfo* row = find_algorithm(a)) return *row;
  std::string values;
  for (const AlgorithmInfo& row : kTable)
    values += (values.empty() ? "" : ", ") + std::to_string(static_cast<int>(row.id)) + " (" + row.name + ")";
  throw Error(ErrorCode::InvalidUsage, "algorithm " + std::to_string(static_cast<int>(a)) +
                                           " is not valid, expected one of " + values);
}

const char* to_string(Algorithm a) noexcept {
  const AlgorithmInfo* row = find_algorithm(a);
  return row ? row->name : "?";
}

std::string algorithm_names(bool schedules_only) {
  std::string out;
  for (const AlgorithmInfo& row : kTable) {
    if (schedules_only && row.kind != AlgorithmKind::schedule) continue;
    if (!out.empty()) out += ", ";
    out += row.name;
    if (!row.aliases.empty()) {
      out += row.aliases.size() == 1 ? " (alias " : " (aliases ";
      for (std::size_t i = 0; i < row.aliases.size(); ++i) out += (i ? ", " : "") + std::string(row.aliases[i]);
      out += ")";
    }
  }
  return out;
}

Algorithm parse_algorithm(std::string_view name) {
  // Case-insensitive, as torch's backend names ("GLOO", "Ring" and "ring" are one algorithm).
  const auto same = [name](std::string_view known) {
    return name.size() == known.size() && std::equal(name.begin(), name.end(), known.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           });
  };
  for (const AlgorithmInfo& row : kTable) {
    if (same(row.name)) return row.id;
    for (std::string_view alias : row.aliases)
      if (same(alias)) return row.id;
  }
  throw Error(ErrorCode::InvalidUsage,
              "unknown algorithm '" + std::string(name) + "': expected one of " + algorithm_names());
}

const std::vector<Algorithm>& scheduled_algorithms() {
  static const std::vector<Algorithm> all = [] {
    std::vector<Algorithm> v;
    for (const AlgorithmInfo& row : kTable)
      if (row.kind == AlgorithmKind::schedule) v.push_back(row.id);
    return v;
  }();
  return all;
}

Schedule synthesize(Algorithm algo, int nranks, const SynthOptions& opts) {
  const AlgorithmInfo& row = algorithm_info(algo);
  require(row.synthesize != nullptr, std::string("algorithm '") + row.name +
                                         "' has no schedule, expected one of " + algorithm_names(true));
  require(nranks >= kMinRanks && nranks <= kMaxRanks,
          "nranks = " + std::to_string(nranks) + ", expected " + std::to_string(kMinRanks) + " <= nranks <= " +
              std::to_string(kMaxRanks));
  const int straggler = opts.straggler.value_or(nranks - 1);
  require(straggler >= 0 && straggler < nranks,
          "straggler = " + std::to_string(straggler) + ", expected a rank in [0, " + std::to_string(nranks) + ")");
  require(opts.pipeline >= 0 && opts.pipeline <= kMaxPipeline,
          "pipeline = " + std::to_string(opts.pipeline) + ", expected a K in [1, " + std::to_string(kMaxPipeline) +
              "] or auto");
  if (opts.stragglers.empty()) return row.synthesize(nranks, straggler, opts);
  // A set of late ranks: distinct ranks in range; one of them is `straggler`.
  std::vector<int> late = opts.stragglers;
  std::sort(late.begin(), late.end());
  for (std::size_t i = 0; i < late.size(); ++i) {
    require(late[i] >= 0 && late[i] < nranks, "stragglers: rank " + std::to_string(late[i]) +
                                                  ", expected ranks in [0, " + std::to_string(nranks) + ")");
    require(i == 0 || late[i] != late[i - 1], "stragglers: rank " + std::to_string(late[i]) + " given twice, expected distinct ranks");
  }
  require(!opts.straggler || std::find(late.begin(), late.end(), *opts.straggler) != late.end(),
          "straggler = " + std::to_string(opts.straggler.value_or(-1)) + " is not in stragglers, expected one of them or none");
  if (algo == Algorithm::stragglar_k || algo == Algorithm::hierarchical) {
    require(2 * late.size() <= static_cast<std::size_t>(nranks),
            "stragglers: " + std::to_string(late.size()) + " late ranks on " + std::to_string(nranks) +
                " ranks, expected at most n/2 = " + std::to_string(nranks / 2));
    return row.synthesize(nranks, late.front(), opts);
  }
  if (late.size() == 1) {
    SynthOptions one = opts;
    one.straggler = late.front();
    one.stragglers.clear();
    return row.synthesize(nranks, late.front(), one);
  }
  require(!row.uses_straggler, std::string("algorithm '") + row.name + "' handles one late rank, got " +
                                   std::to_string(late.size()) + " stragglers; expected stragglar-k for several");
  return row.synthesize(nranks, straggler, opts);
}

namespace detail {

std::vector<int> straggler_relabeling(int n, int straggler) {
  // rank r -> (r + straggler + 1) mod n, so n-1 -> straggler and the ring order is kept.
  std::vector<int> perm(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) perm[r] = (r + straggler + 1) % n;
  return perm;
}

}  // namespace detail
}  // namespace stragglar
