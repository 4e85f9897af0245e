// Per-round costs the α-β model leaves out: the host's time to enqueue one round of the executor
// (docs/gpu.md "The simulator's GPU model"). On a GPU the executor never waits on the host
// between rounds: it enqueues each round (one NCCL group of ncclSend/ncclRecv, then the reduce
// kernel) and goes on, so a rank's round r cannot start on its stream before its host has
// enqueued rounds 1..r. The simulator charges that (simulate.hpp): a constant, or a table
// measured by bench_nccl_rounds (JSON "stragglar-round-costs/1", read and written here).
#pragma once
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace stragglar {

// One measured point: `algorithm`'s schedule at `nranks` ranks on a buffer of `bytes`.
struct RoundCostRow {
  std::string algorithm;
  int nranks = 0;
  std::size_t bytes = 0;
  int rounds = 0;              // the most rounds any rank runs
  int calls = 0;               // timed calls
  double host_s = 0;           // host enqueue time per round: median over ranks × calls
  double host_min_s = 0, host_max_s = 0;
  double gpu_s = -1;           // GPU time per round from events (waits for peers included); < 0: not measured
  double host_call_s = 0;      // host time of the whole executor call, median
  double gpu_call_s = -1;      // GPU time of the whole call, median; < 0: not measured
  long long wrong = 0;         // elements that differ from the exact sum, over the ranks (last call)
};

// A bench_nccl_rounds run: where it ran and its rows.
struct RoundCostTable {
  std::string tool = "bench_nccl_rounds";
  std::string transport;       // e.g. "NCCL over loopback sockets, 1 GPU shared"
  std::string device;          // e.g. "NVIDIA H200"
  std::string library;         // e.g. "NCCL 2.28.3"
  std::string date;            // UTC, ISO 8601
  int pipeline = 1;            // StragglAR's K
  bool complete = true;        // false: stopped at its deadline, `skipped` not measured
  std::vector<RoundCostRow> rows;
  std::vector<RoundCostRow> skipped;  // algorithm, nranks, bytes only
};

inline constexpr std::string_view kRoundCostsFormat = "stragglar-round-costs/1";

// JSON (times in µs: "host_us_per_round" ...). The reader needs format, rows, and per row
// algorithm, nranks (>= 2), bytes (> 0), host_us_per_round (finite, >= 0); the rest is
// optional. Throws Error(InvalidUsage) naming `what`, the row and the field otherwise.
void write_round_costs_json(std::ostream& out, const RoundCostTable& t);
RoundCostTable read_round_costs_json(std::istream& in, const std::string& what);
RoundCostTable read_round_costs_file(const std::string& path);
// The readable table bench_nccl_rounds prints (one line per row, µs).
std::string format_round_costs(const RoundCostTable& t);

// The host time per round the simulator charges.
class RoundOverhead {
 public:
  RoundOverhead() = default;                  // none: the α-β model alone
  explicit RoundOverhead(double host_s);      // the same for every round; Error(InvalidUsage) if < 0
  explicit RoundOverhead(RoundCostTable table);  // measured; Error(InvalidUsage) without rows
  // Seconds per round for `algorithm`'s schedule at `nranks` ranks on `bytes`. A table uses the
  // rows of `algorithm`, or every row when it has none of it (equal points averaged); between
  // measured sizes linear in log2(bytes), between measured rank counts linear in n, and beyond
  // the measured range the nearest point's value (never extrapolated).
  double host_s(std::string_view algorithm, int nranks, std::size_t bytes) const;
  // Whether a table's lookup for these falls outside its measured range of n or size (then
  // the nearest measured value stands in); a constant never does.
  bool beyond_table(std::string_view algorithm, int nranks, std::size_t bytes) const;
  bool none() const noexcept { return table_ == nullptr && constant_s_ == 0; }
  // "12 us per round" or "measured: <device>, <transport>".
  std::string describe() const;

 private:
  double constant_s_ = 0;
  std::shared_ptr<const RoundCostTable> table_;
};

}  // namespace stragglar
