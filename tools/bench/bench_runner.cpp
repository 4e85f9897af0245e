// The benchmark runner (bench_runner.hpp): everything stragglar-bench, stragglar-bench-gpu and
// stragglar-ucx-bench share.
//
// One iteration (docs/runtime.md "stragglar-bench"): the backend resets its work buffer from
// the inputs and drains (not timed), MPI_Barrier (the common start), every rank marks its
// start, the delayed rank sleeps --delay ms while the others enter at once, everyone marks its
// entry, runs the allreduce in place and marks its exit. exposed = latest exit − latest entry,
// time = latest exit − the common start; medians over the timed iterations. Where every rank
// reads one clock (the ranks of one host, a CPU backend: detail::this_clock_id) the marks are
// compared on it, exactly (every rank's entry counts). Otherwise each rank measures on its own
// clock from its own barrier exit, and the entry that counts is the delayed ranks' (every rank's
// under a pattern; none without a delay: exposed = time there): ranks leave a barrier
// apart (on the 2-core VM with 8 ranks 2.5-7 ms, depending on how the ranks waiting in the
// allreduce share the cores), and that spread then counts as exposed time.
#include "bench_runner.hpp"

#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu_device.hpp"
#include "runtime/element.hpp"
#include "runtime/hosts.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"
#include "stragglar/units.hpp"

namespace stragglar::bench {
namespace {

int g_rank = 0, g_n = 1;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

// ---- --algo entries: NAME or NAME:K -----------------------------------------------------------
// NAME:K fixes the pipelining factor of that entry only, so `--algo stragglar:1,stragglar`
// compares the paper's schedule with the model's K in one run. auto is not told the straggler.
struct Entry {
  std::string text;  // as written: the algo column
  Options options;   // algorithm, straggler (-1 for auto), pipeline; cost set per run
};

std::vector<Entry> parse_entries(const RunnerFlags& f, int straggler, const std::vector<int>& late) {
  std::vector<Entry> out;
  std::stringstream list(f.algos);
  std::string text;
  while (std::getline(list, text, ',')) {
    if (text.empty()) continue;
    const std::size_t colon = text.find(':');
    Entry e{text, options_for(text.substr(0, colon))};
    const AlgorithmInfo& info = algorithm_info(e.options.algorithm);
    if (colon == std::string::npos) {
      e.options.pipeline = parse_pipeline_text(f.pipeline, "--pipeline");
    } else {
      require(info.pipelined || info.kind == AlgorithmKind::automatic,
              "--algo entry '" + text + "': only pipelined algorithms (stragglar, stragglar-k, hierarchical) and auto take a pipeline factor");
      e.options.pipeline = parse_pipeline_text(text.substr(colon + 1), "--algo entry '" + text + "' pipeline");
    }
    e.options.straggler = info.kind == AlgorithmKind::automatic ? -1 : straggler;
    if (e.options.algorithm == Algorithm::stragglar_k || e.options.algorithm == Algorithm::hierarchical)
      e.options.stragglers = late;
    out.push_back(std::move(e));
  }
  require(!out.empty(), "--algo '" + f.algos + "' names no algorithm");
  return out;
}

// ---- --delay-pattern FILE ------------------------------------------------------------------------
// One line per timed iteration: n delays in ms (rank 0 first), whitespace-separated; blank lines
// and lines starting with '#' are skipped. Every rank reads the same file.
using DelayPattern = std::vector<std::vector<double>>;

DelayPattern read_delay_pattern(const std::string& file) {
  DelayPattern lines;
  if (file.empty()) return lines;
  std::ifstream in(file);
  require(static_cast<bool>(in), "--delay-pattern " + file + ": cannot open the file");
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    const std::size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string::npos || text[first] == '#') continue;
    std::istringstream fields(text);
    std::vector<double> line;
    std::string field;
    while (fields >> field) {
      std::size_t used = 0;
      double ms = -1;
      try {
        ms = std::stod(field, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used == field.size() && std::isfinite(ms) && ms >= 0,
              "--delay-pattern " + file + " line " + std::to_string(number) + ": '" + field +
                  "' is not a delay, expected a finite number of ms >= 0");
      line.push_back(ms);
    }
    require(static_cast<int>(line.size()) == g_n,
            "--delay-pattern " + file + " line " + std::to_string(number) + ": " + std::to_string(line.size()) +
                " delays, expected one per rank (" + std::to_string(g_n) + ")");
    lines.push_back(std::move(line));
  }
  require(!lines.empty(), "--delay-pattern " + file + ": no line of delays, expected one per timed iteration");
  return lines;
}

// The rank that enters last in the most lines (ties: the lowest rank); lines where nobody is
// late (all delays equal) count for nobody. -1 when no line has a late rank.
int most_often_late(const DelayPattern& pattern) {
  std::vector<int> count(static_cast<std::size_t>(g_n), 0);
  for (const std::vector<double>& line : pattern) {
    std::size_t last = 0;
    double lowest = line[0];
    for (std::size_t r = 1; r < line.size(); ++r) {
      if (line[r] > line[last]) last = r;
      lowest = std::min(lowest, line[r]);
    }
    if (line[last] > lowest) ++count[last];
  }
  int best = -1;
  for (std::size_t r = 0; r < count.size(); ++r)
    if (count[r] > 0 && (best < 0 || count[r] > count[static_cast<std::size_t>(best)])) best = static_cast<int>(r);
  return best;
}

// ---- --move-straggler I:R[,I:R...] --------------------------------------------------------------
struct Move {
  int iter = 0, rank = 0;
};

std::vector<Move> parse_moves(const std::string& text, int iters) {
  std::vector<Move> moves;
  std::stringstream list(text);
  std::string item;
  const std::string expected = "', expected I:R[,I:R...] with I a timed iteration in [0, " + std::to_string(iters) +
                               ") (-n) and R a rank in [0, " + std::to_string(g_n) + ")";
  while (std::getline(list, item, ',')) {
    if (item.empty()) continue;
    const std::size_t colon = item.find(':');
    Move m;
    try {
      require(colon != std::string::npos, "");
      std::size_t used_i = 0, used_r = 0;
      m.iter = std::stoi(item.substr(0, colon), &used_i);
      m.rank = std::stoi(item.substr(colon + 1), &used_r);
      require(used_i == colon && used_r == item.size() - colon - 1, "");
    } catch (const std::exception&) {
      throw Error(ErrorCode::InvalidUsage, "--move-straggler: cannot read '" + item + expected);
    }
    require(m.iter >= 0 && m.iter < iters && m.rank >= 0 && m.rank < g_n,
            "--move-straggler: '" + item + expected);
    for (const Move& o : moves)
      require(o.iter != m.iter, "--move-straggler: iteration " + std::to_string(m.iter) + " is named twice");
    moves.push_back(m);
  }
  require(text.empty() || !moves.empty(), "--move-straggler '" + text + "' names no move");
  std::sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) { return a.iter < b.iter; });
  return moves;
}

// ---- exactly known inputs (as nccl-tests) -------------------------------------------------------
// Small integers: every partial result is exact in every dtype, so any order of reduction gives
// the same bits and the result is known exactly (n <= 15 for fp16 prod). Element i of rank r
// depends on (7r + 13i) mod 5 only: inputs and results repeat every kPeriod elements.
constexpr std::size_t kPeriod = 5;

double input_value(int r, std::size_t i, ReduceOp op) {
  const auto k = static_cast<long>((static_cast<std::size_t>(r) * 7 + i * 13) % kPeriod);
  switch (op) {
    case ReduceOp::prod: return (k % 2 ? 2.0 : 1.0) * (k >= 3 ? -1.0 : 1.0);  // |prod| <= 2^n
    case ReduceOp::min:
    case ReduceOp::max: return static_cast<double>(k * 3 - 6 + r % 3);
    default: return static_cast<double>(k - 2);  // sum/avg: |sum| <= 2n
  }
}

// The exact result of element i, rounded to the dtype as the runtime rounds it.
double expected_value(std::size_t i, DataType t, ReduceOp op) {
  double acc = input_value(0, i, op);
  for (int r = 1; r < g_n; ++r) {
    const double x = input_value(r, i, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc += x; break;
      case ReduceOp::prod: acc *= x; break;
      case ReduceOp::min: acc = std::min(acc, x); break;
      case ReduceOp::max: acc = std::max(acc, x); break;
    }
  }
  if (op == ReduceOp::avg) {
    if (t == DataType::int32 || t == DataType::int64) return std::trunc(acc / g_n);
    // The runtime divides the exact sum once: the result is the dtype's rounding of acc/n.
    std::uint64_t tmp = 0;
    store_element(&tmp, 0, t, acc / g_n);
    return load_element(&tmp, 0, t);
  }
  return acc;
}

// Unit roundoff of a floating dtype (0 for integers).
double unit_roundoff(DataType t) {
  switch (t) {
    case DataType::float16: return 0x1p-11;
    case DataType::bfloat16: return 0x1p-8;
    case DataType::float32: return 0x1p-24;
    case DataType::float64: return 0x1p-53;
    default: return 0;
  }
}

// buf[0, count) = the kPeriod elements of `pattern`, repeated (doubling copies).
void fill_periodic(std::vector<std::byte>& buf, const std::vector<std::byte>& pattern, std::size_t count,
                   std::size_t es) {
  const std::size_t bytes = count * es;
  if (bytes == 0) return;
  const std::size_t first = std::min(bytes, pattern.size());
  std::memcpy(buf.data(), pattern.data(), first);
  for (std::size_t done = first; done < bytes;) {
    const std::size_t n = std::min(done, bytes - done);
    std::memcpy(buf.data() + done, buf.data(), n);
    done += n;
  }
}

// FNV-1a over 8-byte words and the tail: ranks whose bits differ get different hashes.
std::uint64_t hash_bits(const std::byte* p, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ static_cast<std::uint64_t>(p[i])) * 1099511628211ull;
  return h;
}

struct Row {
  std::size_t bytes = 0, count = 0;
  std::string algo;
  int pipeline = 1;
  double delay_ms = 0, time_us = 0, exposed_us = 0, algbw = 0, busbw = 0;
  std::optional<long> wrong;  // nullopt: not checked (-c 0) or the row failed
  std::optional<double> predicted_us, predicted_exposed_us;
  std::vector<double> time_us_per_iter, exposed_us_per_iter;
  double exposed_total_us = 0;  // sum over the timed iterations (the pattern runs' measure)
  std::vector<detail::Choice> choices;  // per timed iteration: what the library ran
  std::string error;
};

std::string fmt(const char* f, double v) {
  char text[64];
  std::snprintf(text, sizeof text, f, v);
  return text;
}

// ---- the benchmark ------------------------------------------------------------------------------
class Bench {
 public:
  Bench(const RunnerFlags& f, Backend& b, DataType t, ReduceOp op, int straggler, std::vector<Move> moves,
        std::vector<int> late, DelayPattern pattern)
      : f_(f), b_(b), t_(t), op_(op), es_(size_of(t)), straggler_(straggler), moves_(std::move(moves)),
        late_(std::move(late)), pattern_(std::move(pattern)) {
    // One clock for every rank: each rank's clock id (hosts.hpp), equal everywhere.
    const std::int64_t id = detail::this_clock_id();
    std::int64_t lo_hi[2] = {-id, id}, agreed[2] = {0, 0};
    MPI_Allreduce(lo_hi, agreed, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    one_clock_ = id >= 0 && -agreed[0] == agreed[1];
  }

  CostModel calibrate(std::size_t large);
  Row run_row(const Entry& entry, std::size_t bytes, const std::optional<CostModel>& cost);

 private:
  bool delaying() const { return !f_.ideal && f_.delay_ms > 0; }
  // This rank's delay in timed iteration `iter` (-1: warm-up and check, which use iteration 0's
  // delays: line 1 of a pattern). Without a pattern: --delay on the delayed rank of that
  // iteration, and on every rank of --stragglers.
  double my_delay_ms(int iter) const {
    const int i = std::max(iter, 0);
    if (!pattern_.empty()) return pattern_[static_cast<std::size_t>(i) % pattern_.size()][static_cast<std::size_t>(g_rank)];
    return delaying() && late_here(i) ? f_.delay_ms : 0.0;
  }
  bool late_here(int iter) const {
    return g_rank == delayed_rank(iter) || std::find(late_.begin(), late_.end(), g_rank) != late_.end();
  }
  // Whether this rank's entry counts for the exposed time (the latest entry): every rank under
  // a pattern, else the delayed ranks.
  bool entry_counts(int iter) const { return !pattern_.empty() || (delaying() && late_here(std::max(iter, 0))); }
  // The delayed rank of timed iteration `iter` (warm-up and check: that of iteration 0).
  int delayed_rank(int iter) const {
    int r = straggler_;
    for (const Move& m : moves_)
      if (m.iter <= iter) r = m.rank;
    return r;
  }
  void prepare(std::size_t count);
  Backend::Times iterate(const Options& o, bool schedule, std::size_t count, int iter);
  long check(std::size_t count, bool loose);
  template <class Body>
  double slowest_median(int reps, Body&& body);

  const RunnerFlags& f_;
  Backend& b_;
  DataType t_;
  ReduceOp op_;
  std::size_t es_;
  int straggler_;
  std::vector<Move> moves_;
  std::vector<int> late_;  // --stragglers (empty: the one delayed rank)
  DelayPattern pattern_;
  bool one_clock_ = false;  // every rank reads one monotonic clock (the backend's marks may not)
  std::vector<std::byte> host_, expected_, result_;
  std::vector<std::byte> expected_pattern_;
  std::vector<double> magnitude_;  // per pattern element: Σ_r |input| (the loose bound)
};

// Inputs of this rank and the expected result for `count` elements; the inputs go to the backend.
void Bench::prepare(std::size_t count) {
  const std::size_t bytes = count * es_;
  std::vector<std::byte> pattern(kPeriod * es_);
  expected_pattern_.assign(kPeriod * es_, std::byte{0});
  magnitude_.assign(kPeriod, 0.0);
  for (std::size_t i = 0; i < kPeriod; ++i) {
    store_element(pattern.data(), i, t_, input_value(g_rank, i, op_));
    store_element(expected_pattern_.data(), i, t_, expected_value(i, t_, op_));
    for (int r = 0; r < g_n; ++r) magnitude_[i] += std::fabs(input_value(r, i, op_));
  }
  host_.resize(std::max(host_.size(), bytes));
  fill_periodic(host_, pattern, count, es_);
  b_.upload_input(host_.data(), bytes);
  if (f_.check) {
    expected_.resize(std::max(expected_.size(), bytes));
    result_.resize(std::max(result_.size(), bytes));
    fill_periodic(expected_, expected_pattern_, count, es_);
  }
}

Backend::Times Bench::iterate(const Options& o, bool schedule, std::size_t count, int iter) {
  b_.reset(count * es_);  // fresh inputs, not timed
  PhaseSelection phases = PhaseSelection::all;
  if (f_.ideal && schedule) {
    // Ideal case (paper §4): the others finish the phases that do not wait for the straggler
    // before it arrives; only what follows is timed.
    b_.allreduce(count, t_, op_, o, PhaseSelection::no_wait_only);
    phases = PhaseSelection::waiting_only;
  }
  b_.drain();
  MPI_Barrier(MPI_COMM_WORLD);  // the common start
  b_.mark_start();
  if (const double ms = my_delay_ms(iter); ms > 0) b_.sleep(ms);
  b_.mark_entry();
  b_.allreduce(count, t_, op_, o, phases);
  b_.mark_exit();
  return b_.read_times();
}

// Elements (on all ranks) that differ from the exactly known result, plus one for each rank
// whose result bits differ from the others'. `loose`: compare within rounding (ncclAllReduce's
// avg of floating types pre-multiplies by 1/n instead of dividing the exact sum once).
long Bench::check(std::size_t count, bool loose) {
  const std::size_t bytes = count * es_;
  b_.download_work(result_.data(), bytes);
  long wrong = 0;
  if (bytes > 0 && std::memcmp(result_.data(), expected_.data(), bytes) != 0) {
    const double u = unit_roundoff(t_);
    for (std::size_t i = 0; i < count; ++i) {
      if (std::memcmp(result_.data() + i * es_, expected_.data() + i * es_, es_) == 0) continue;
      if (loose) {
        const double got = load_element(result_.data(), i, t_), want = load_element(expected_.data(), i, t_);
        if (std::fabs(got - want) <= (2.0 * g_n + 2.0) * u * magnitude_[i % kPeriod] / g_n) continue;
      }
      ++wrong;
    }
  }
  const std::uint64_t h = hash_bits(result_.data(), bytes);
  std::uint64_t hv[2] = {h, ~h}, hmax[2] = {0, 0};
  MPI_Allreduce(hv, hmax, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if ((hmax[0] != h || ~hmax[1] != h) && wrong == 0) wrong = 1;
  long total = 0;
  MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

Row Bench::run_row(const Entry& entry, std::size_t bytes, const std::optional<CostModel>& cost) {
  Row row;
  row.count = bytes / es_;
  row.bytes = row.count * es_;
  row.algo = entry.text;
  row.delay_ms = f_.ideal || !pattern_.empty() ? 0 : f_.delay_ms;
  Options o = entry.options;
  o.cost = cost;
  try {
    const AlgorithmInfo& info = algorithm_info(o.algorithm);
    const bool schedule = info.kind == AlgorithmKind::schedule;
    // K: what the entry runs; auto: the K of its StragglAR candidate.
    Options k = o;
    if (info.kind == AlgorithmKind::automatic) {
      k.algorithm = Algorithm::stragglar;
      if (!k.cost) k.cost = b_.auto_cost_model();  // auto's candidates take K from its model
    }
    row.pipeline = resolve_pipeline(k, g_n, row.bytes);
    prepare(row.count);
    const bool loose = o.algorithm == Algorithm::native && op_ == ReduceOp::avg && unit_roundoff(t_) > 0;

    // -c 1: one untimed iteration, then every timed one whose choice is new (auto switches).
    std::vector<detail::Choice> checked;
    long wrong = 0;
    if (f_.check) {
      iterate(o, schedule, row.count, -1);
      wrong += check(row.count, loose);
      checked.push_back(b_.last_choice());
    }
    // Warm-up with the timed iterations' delay: auto's policy needs the steady state.
    for (int i = 0; i < f_.warmup; ++i) iterate(o, schedule, row.count, -1);
    std::vector<double> times, exposed;
    for (int i = 0; i < f_.iters; ++i) {
      const Backend::Times t = iterate(o, schedule, row.count, i);
      const detail::Choice c = b_.last_choice();
      const bool fresh = f_.check && std::find(checked.begin(), checked.end(), c) == checked.end();
      // Max over ranks of: exit, counted entry (each on this rank's own clock from its start),
      // exit and entry on the one clock (every rank's entry: the latest is the delayed rank's,
      // or, with nobody delayed, the last to leave the barrier), -start, fresh, and whether a
      // rank has no shared clock.
      const bool on_one_clock = one_clock_ && t.start_s >= 0;
      const double at = on_one_clock ? t.start_s : 0.0;
      double local[7] = {t.exit_s, entry_counts(i) ? t.entry_s : 0.0, at + t.exit_s, at + t.entry_s, -at,
                         fresh ? 1.0 : 0.0, on_one_clock ? 0.0 : 1.0};
      double global[7] = {0, 0, 0, 0, 0, 0, 0};
      MPI_Allreduce(local, global, 7, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (global[6] == 0) {  // latest exit − latest entry; time from the first start
        times.push_back(global[2] + global[4]);
        exposed.push_back(global[2] - global[3]);
      } else {
        times.push_back(global[0]);
        exposed.push_back(global[0] - global[1]);
      }
      row.choices.push_back(c);
      if (global[5] > 0) {
        wrong += check(row.count, loose);
        checked.push_back(c);
      }
    }
    if (f_.check) row.wrong = wrong;
    for (std::size_t i = 0; i < times.size(); ++i) {
      row.time_us_per_iter.push_back(times[i] * 1e6);
      row.exposed_us_per_iter.push_back(exposed[i] * 1e6);
    }
    for (double e : exposed) row.exposed_total_us += e * 1e6;
    row.time_us = median(times) * 1e6;
    row.exposed_us = median(exposed) * 1e6;
    if (row.exposed_us > 0) row.algbw = static_cast<double>(row.bytes) / (row.exposed_us * 1e-6) / 1e9;
    row.busbw = row.algbw * 2.0 * (g_n - 1) / g_n;
    if (cost && schedule && pattern_.empty()) {
      // The schedule the runtime runs (same straggler, same K), with the same delay.
      Delay d;
      d.ideal = f_.ideal;
      d.seconds = f_.ideal ? 0 : f_.delay_ms * 1e-3;
      const SimResult sim = late_.empty() ? simulate(*schedule_for(o, g_n, row.bytes), row.bytes, *cost, d)
                                          : simulate(*schedule_for(o, g_n, row.bytes), row.bytes, *cost, d, late_);
      row.predicted_us = sim.time_s * 1e6;
      row.predicted_exposed_us = sim.exposed_s * 1e6;
    }
  } catch (const Error& e) {
    row.error = e.what();
    row.wrong.reset();
  }
  return row;
}

// Repetitions of `body` (seconds on this rank) after a drain and a barrier each; the slowest
// rank of each, the median over repetitions (the first two are warm-up).
template <class Body>
double Bench::slowest_median(int reps, Body&& body) {
  std::vector<double> ts;
  for (int i = 0; i < reps + 2; ++i) {
    b_.drain();
    MPI_Barrier(MPI_COMM_WORLD);
    double dt = body(), worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i >= 2) ts.push_back(worst);
  }
  return median(ts);
}

// α, β: all ranks pair up (r ↔ r^1; an odd last rank idles) and exchange messages both ways at
// once, as a round of a schedule does; t(s) = α + β·s from 4 KiB and `large` bytes. γ: rank 0
// alone runs the runtime's own reduction (this run's dtype and op) on `large` bytes, t = γ·s:
// the reducer's own speed. (All ranks reducing at once would charge every reduction with the
// host's core contention: on an oversubscribed host that overstates schedules in which few
// ranks reduce per round.) Every rank ends with the same numbers (maxima over ranks).
CostModel Bench::calibrate(std::size_t large) {
  const std::size_t small = 4096;
  const int peer = (g_rank ^ 1) < g_n ? (g_rank ^ 1) : -1;
  const double t_small = slowest_median(30, [&] { return b_.time_exchange(small, peer); });
  const double t_large = slowest_median(10, [&] { return b_.time_exchange(large, peer); });

  // Reduce real values (byte patterns could be denormals, which are slow); prod of values near
  // 1 stays finite over the repetitions.
  const std::size_t count = large / es_;
  std::vector<std::byte> work(count * es_), input(count * es_);
  for (std::size_t i = 0; i < count; ++i) {
    store_element(work.data(), i, t_, 1.0 + static_cast<double>(i % 3));
    store_element(input.data(), i, t_, 1.0);
  }
  b_.upload_work(work.data(), work.size());
  b_.upload_input(input.data(), input.size());
  const double t_reduce = slowest_median(10, [&] { return g_rank == 0 ? b_.time_reduce(count, t_, op_) : 0.0; });

  CostModel c;
  c.beta_s_per_byte = std::max(1e-15, (t_large - t_small) / static_cast<double>(large - small));
  c.alpha_s = std::max(0.0, t_small - c.beta_s_per_byte * static_cast<double>(small));
  c.gamma_s_per_byte = t_reduce / static_cast<double>(count * es_);
  if (g_rank == 0)
    std::printf("# calibration: exchange %zu B: %.1f us, %zu B: %.1f us -> alpha %.2f us, beta %.3f GB/s; "
                "reduce %zu B: %.1f us -> gamma %.3f GB/s\n",
                small, t_small * 1e6, large, t_large * 1e6, c.alpha_s * 1e6, 1.0 / c.beta_s_per_byte / 1e9,
                count * es_, t_reduce * 1e6, c.gamma_s_per_byte > 0 ? 1.0 / c.gamma_s_per_byte / 1e9 : 0.0);
  return c;
}

// "stragglar(straggler 7) ×8 (iterations 0-7), ring ×2 (8-9)": what auto ran, in runs.
std::string choice_runs(const std::vector<detail::Choice>& cs) {
  std::string out;
  for (std::size_t i = 0; i < cs.size();) {
    std::size_t j = i;
    while (j < cs.size() && cs[j] == cs[i]) ++j;
    if (!out.empty()) out += ", ";
    out += to_string(cs[i]) + " (iteration" + (j - i > 1 ? "s " + std::to_string(i) + "-" + std::to_string(j - 1)
                                                           : " " + std::to_string(i)) + ")";
    i = j;
  }
  return out;
}

void print_header(const Tool& tool, const RunnerFlags& f, const std::string& transport, int straggler,
                  const std::vector<Move>& moves, bool calibrated) {
  std::printf("# %s: nranks %d, transport: %s, straggler %d, delay %g ms%s, iters %d, warmup %d, check %d%s\n",
              tool.name, g_n, transport.c_str(), straggler, f.delay_ms,
              f.ideal ? " (ideal: waiting phases only)" : "", f.iters, f.warmup, f.check,
              f.keep_buffers ? ", buffers kept (--keep-buffers)" : "");
  for (const Move& m : moves)
    std::printf("# delayed rank: %d from timed iteration %d on\n", m.rank, m.iter);
  if (!f.delay_pattern.empty())
    std::printf("# delay pattern %s: per-rank delays per timed iteration (cycled; warm-up and check: line 1); "
                "exposed: latest exit - latest entry; total(ms): sum of exposed over the timed iterations\n",
                f.delay_pattern.c_str());
  else
    std::printf("# time: latest exit - common start; exposed: latest exit - delayed rank's entry; bw from exposed\n");
  std::printf("%12s %12s %8s %6s %10s %4s %9s %12s %12s %9s %9s %7s", "size", "count", "type", "redop", "algo", "K",
              "delay(ms)", "time(us)", "exposed(us)", "algbw", "busbw", "#wrong");
  if (calibrated) std::printf(" %12s %12s %9s", "pred(us)", "pred_exp(us)", "meas/pred");
  std::printf("\n");
}

void print_row(const Row& r, DataType t, ReduceOp op, bool calibrated, bool automatic, bool pattern) {
  if (!r.error.empty()) {
    std::printf("# %s, %zu bytes: error: %s\n", r.algo.c_str(), r.bytes, r.error.c_str());
  } else {
    std::printf("%12zu %12zu %8s %6s %10s %4d %9g %12.1f %12.1f %9.3f %9.3f %7s", r.bytes, r.count, to_string(t),
                to_string(op), r.algo.c_str(), r.pipeline, r.delay_ms, r.time_us, r.exposed_us, r.algbw, r.busbw,
                r.wrong ? std::to_string(*r.wrong).c_str() : "N/A");
    if (calibrated) {
      if (r.predicted_exposed_us)
        std::printf(" %12.1f %12.1f %9.2f", *r.predicted_us, *r.predicted_exposed_us,
                    r.exposed_us / *r.predicted_exposed_us);
      else
        std::printf(" %12s %12s %9s", "-", "-", "-");
    }
    std::printf("\n");
    if (pattern) std::printf("#   %s total(ms): %.3f\n", r.algo.c_str(), r.exposed_total_us * 1e-3);
    if (automatic) std::printf("#   %s ran: %s\n", r.algo.c_str(), choice_runs(r.choices).c_str());
  }
  std::fflush(stdout);
}

void write_json(const std::string& file, const Tool& tool, const RunnerFlags& f, const std::string& transport,
                int straggler, const std::vector<Move>& moves, DataType t, ReduceOp op,
                const std::optional<CostModel>& cost, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["tool"] = tool.name;
  j["nranks"] = g_n;
  j["transport"] = transport;
  j["straggler"] = straggler;
  j["delay_ms"] = f.delay_ms;
  j["ideal"] = f.ideal;
  j["iters"] = f.iters;
  j["warmup"] = f.warmup;
  j["check"] = f.check;
  j["type"] = to_string(t);
  j["redop"] = to_string(op);
  j["delay_pattern"] = f.delay_pattern;
  j["keep_buffers"] = f.keep_buffers;
  j["move_straggler"] = nlohmann::json::array();
  for (const Move& m : moves) j["move_straggler"].push_back({{"iter", m.iter}, {"rank", m.rank}});
  if (cost)
    j["calibration"] = {{"alpha_us", cost->alpha_s * 1e6},
                        {"bandwidth_GBps", 1.0 / cost->beta_s_per_byte / 1e9},
                        {"reduce_bandwidth_GBps", cost->gamma_s_per_byte > 0 ? 1.0 / cost->gamma_s_per_byte / 1e9 : 0.0}};
  j["rows"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json x = {{"algo", r.algo},         {"bytes", r.bytes},         {"count", r.count},
                        {"type", to_string(t)},   {"redop", to_string(op)},   {"pipeline", r.pipeline},
                        {"delay_ms", r.delay_ms}, {"time_us", r.time_us},     {"exposed_us", r.exposed_us},
                        {"algbw", r.algbw},       {"busbw", r.busbw}};
    x["wrong"] = r.wrong ? nlohmann::json(*r.wrong) : nlohmann::json(nullptr);
    if (r.predicted_us) {
      x["predicted_us"] = *r.predicted_us;
      x["predicted_exposed_us"] = *r.predicted_exposed_us;
    }
    x["time_us_per_iter"] = r.time_us_per_iter;
    x["exposed_us_per_iter"] = r.exposed_us_per_iter;
    x["exposed_total_us"] = r.exposed_total_us;
    x["choices"] = nlohmann::json::array();
    for (const detail::Choice& c : r.choices)
      x["choices"].push_back({{"algo", to_string(c.algorithm)}, {"straggler", c.straggler}});
    if (!r.error.empty()) x["error"] = r.error;
    j["rows"].push_back(std::move(x));
  }
  std::ofstream out(file);
  out << j.dump(2) << "\n";
  require(static_cast<bool>(out), "--json " + file + ": cannot write the file", ErrorCode::SystemError);
}

void write_csv(const std::string& file, DataType t, ReduceOp op, const std::vector<Row>& rows) {
  std::ofstream out(file);
  out << "size,count,type,redop,algo,pipeline,delay_ms,time_us,exposed_us,algbw_GBps,busbw_GBps,wrong,predicted_us,"
         "predicted_exposed_us,error\n";
  for (const Row& r : rows) {
    std::string error = r.error;
    std::replace(error.begin(), error.end(), '"', '\'');
    out << r.bytes << ',' << r.count << ',' << to_string(t) << ',' << to_string(op) << ',' << r.algo << ','
        << r.pipeline << ',' << r.delay_ms << ',' << fmt("%.3f", r.time_us) << ',' << fmt("%.3f", r.exposed_us) << ','
        << fmt("%.4f", r.algbw) << ',' << fmt("%.4f", r.busbw) << ',' << (r.wrong ? std::to_string(*r.wrong) : "")
        << ',' << (r.predicted_us ? fmt("%.3f", *r.predicted_us) : "") << ','
        << (r.predicted_exposed_us ? fmt("%.3f", *r.predicted_exposed_us) : "") << ',' << '"' << error << '"' << "\n";
  }
  require(static_cast<bool>(out), "--csv " + file + ": cannot write the file", ErrorCode::SystemError);
}

}  // namespace

std::string mpi_library() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  const std::string v(version, static_cast<std::size_t>(len));
  return v.substr(0, v.find_first_of(",\n"));
}

// ---- HostBackend --------------------------------------------------------------------------------
void HostBackend::allocate(std::size_t bytes) {
  work_.assign(bytes, 0);
  input_.assign(bytes, 0);
}
void HostBackend::upload_input(const void* host, std::size_t bytes) { std::memcpy(input_.data(), host, bytes); }
void HostBackend::upload_work(const void* host, std::size_t bytes) { std::memcpy(work_.data(), host, bytes); }
void HostBackend::download_work(void* host, std::size_t bytes) { std::memcpy(host, work_.data(), bytes); }
void HostBackend::reset(std::size_t bytes) { std::memcpy(work_.data(), input_.data(), bytes); }
namespace {
double host_clock_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace
void HostBackend::mark_start() { start_ = host_clock_s(); }
void HostBackend::sleep(double ms) { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms)); }
void HostBackend::mark_entry() { entry_ = host_clock_s() - start_; }
void HostBackend::mark_exit() { exit_ = host_clock_s() - start_; }
double HostBackend::time_reduce(std::size_t count, DataType t, ReduceOp op) {
  const double t0 = MPI_Wtime();
  cpu_reduce(work_.data(), input_.data(), count, t, op);
  return MPI_Wtime() - t0;
}

std::optional<int> parse_flags(int argc, char** argv, const Tool& tool, RunnerFlags& f) {
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  CLI::App app{tool.description};
  add_bench_flags(app, f,
                  "; NAME:K fixes the pipelining factor of that entry (stragglar, auto); auto: the library "
                  "detects the late rank and picks the algorithm (it is not told --straggler)",
                  std::string("ms (") + tool.delay_how + ")");
  app.add_flag("--calibrate", f.calibrate, tool.calibrate_how);
  app.add_option("--csv", f.csv_file, "Write rows as CSV");
  app.add_option("--move-straggler", f.move_straggler,
                 "I:R[,I:R...]: from timed iteration I (0-based) on, rank R is the delayed one");
  app.add_option("--stragglers", f.stragglers,
                 "R,R[,...]: these ranks all come --delay late (a slow node); stragglar-k is told the "
                 "set, stragglar and broadcast the last of them (--straggler is then ignored); with "
                 "--delay-pattern the pattern sets the delays and this only names the set");
  app.add_flag("--keep-buffers", f.keep_buffers,
               "Keep a copy of each in-place buffer to put back if the call raises (the C API's default, "
               "STRAGGLAR_KEEP_BUFFERS; one pass over the buffer per call). Off by default: the benchmark "
               "never reads a failed call's buffer, as an MPI program under MPI_ERRORS_ARE_FATAL");
  app.add_option("--delay-pattern", f.delay_pattern,
                 "FILE: per-rank delays in ms, one line (n numbers) per timed iteration, cycled; warm-ups "
                 "use line 1; exposed = latest exit - latest entry; --straggler defaults to the rank latest "
                 "most often (bench/patterns/)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return g_rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 1);
  }
  return std::nullopt;
}

int run(const Tool& tool, const RunnerFlags& f, Backend& backend) {
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  const DataType t = parse_dtype(f.dtype_name);
  const ReduceOp op = parse_reduce_op(f.op_name);
  require(f.straggler >= -1 && f.straggler < g_n,
          "--straggler " + std::to_string(f.straggler) + " is outside [0, " + std::to_string(g_n) + ") (or -1)");
  DelayPattern pattern = read_delay_pattern(f.delay_pattern);
  require(pattern.empty() || (f.delay_ms == 0 && f.move_straggler.empty() && !f.ideal),
          "--delay-pattern " + f.delay_pattern + ": the pattern sets every delay, expected no --delay, "
          "--move-straggler or --ideal beside it");
  const int late_most = most_often_late(pattern);
  int straggler = f.straggler >= 0 ? f.straggler : late_most >= 0 ? late_most : g_n - 1;
  std::vector<int> late;  // --stragglers
  {
    std::stringstream list(f.stragglers);
    for (std::string item; std::getline(list, item, ',');) {
      std::size_t used = 0;
      int r = -1;
      try {
        r = std::stoi(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      require(used == item.size() && !item.empty() && r >= 0 && r < g_n,
              "--stragglers '" + f.stragglers + "': '" + item + "' is not a rank in [0, " + std::to_string(g_n) + ")");
      late.push_back(r);
    }
    std::sort(late.begin(), late.end());
    require(std::adjacent_find(late.begin(), late.end()) == late.end(), "--stragglers '" + f.stragglers + "' names a rank twice");
    if (!late.empty()) straggler = late.back();
  }
  (void)parse_pipeline_text(f.pipeline, "--pipeline");
  const std::vector<Entry> entries = parse_entries(f, straggler, late);
  std::vector<Move> moves = parse_moves(f.move_straggler, f.iters);
  require(moves.empty() || late.empty(), "--move-straggler and --stragglers: expected one of them");
  require(moves.empty() || !f.ideal, "--move-straggler: the ideal case (--ideal) delays no rank");
  const std::size_t lo = parse_bytes(f.min_bytes), hi = parse_bytes(f.max_bytes);
  require(lo <= hi, "-b " + f.min_bytes + " is larger than -e " + f.max_bytes);
  require(f.factor > 1, "-f " + std::to_string(f.factor) + ": expected a size multiplication factor > 1");
  // Sizes are whole elements (as nccl-tests); two sizes that round to the same count are one row.
  const std::size_t es = size_of(t);
  std::vector<std::size_t> sizes;
  for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * 1.000001; s *= f.factor) {
    const std::size_t bytes = std::min(static_cast<std::size_t>(s), hi) / es * es;  // never past -e (the buffers)
    if (sizes.empty() || sizes.back() != bytes) sizes.push_back(bytes);
  }

  // --calibrate exchanges the per-chunk size (size/(n-1), at least 1 MiB) through the same buffers.
  const std::size_t calib_bytes =
      std::max(hi / static_cast<std::size_t>(std::max(1, g_n - 1)), std::size_t{1} << 20) / es * es;
  backend.allocate(std::max(hi, f.calibrate ? calib_bytes : 0) + es);
  backend.keep_buffers(f.keep_buffers);
  const std::string transport = backend.transport();
  Bench bench(f, backend, t, op, straggler, moves, late, std::move(pattern));
  std::optional<CostModel> cost;
  if (f.calibrate) cost = bench.calibrate(calib_bytes);

  if (g_rank == 0) print_header(tool, f, transport, straggler, moves, cost.has_value());
  if (g_rank == 0 && !late.empty()) std::printf("# late ranks (--stragglers): %s, each %g ms late\n", f.stragglers.c_str(), f.delay_ms);
  std::vector<Row> rows;
  int rc = 0;
  for (std::size_t bytes : sizes) {
    for (const Entry& e : entries) {
      Row row = bench.run_row(e, bytes, cost);
      if (g_rank == 0)
        print_row(row, t, op, cost.has_value(), e.options.algorithm == Algorithm::automatic, !f.delay_pattern.empty());
      if (!row.error.empty() || (row.wrong && *row.wrong > 0)) rc = 1;
      rows.push_back(std::move(row));
    }
  }
  if (g_rank == 0 && !f.json_file.empty()) write_json(f.json_file, tool, f, transport, straggler, moves, t, op, cost, rows);
  if (g_rank == 0 && !f.csv_file.empty()) write_csv(f.csv_file, t, op, rows);
  return rc;
}

int main_with(int argc, char** argv, const Tool& tool, const std::function<std::unique_ptr<Backend>()>& make_backend) {
  MPI_Init(&argc, &argv);
  RunnerFlags flags;
  if (const auto code = parse_flags(argc, argv, tool, flags)) {
    MPI_Finalize();
    return *code;
  }
  int rank = 0, rc = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    // A bad pattern file fails on every rank before the backend connects its ranks (a rank that
    // failed later would leave the others mid-connect, with its transport's error, not this one).
    MPI_Comm_size(MPI_COMM_WORLD, &g_n);
    g_rank = rank;
    (void)read_delay_pattern(flags.delay_pattern);
    const std::unique_ptr<Backend> backend = make_backend();
    rc = run(tool, flags, *backend);
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "%s: %s\n", tool.name, e.what());
    rc = 2;
  }
  MPI_Finalize();
  return rc;
}

}  // namespace stragglar::bench
