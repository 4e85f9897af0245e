// Per-round costs: the stragglar-round-costs/1 table and the simulator's lookup (round_costs.hpp).
#include "stragglar/round_costs.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "stragglar/error.hpp"
#include "stragglar/units.hpp"

namespace stragglar {
namespace {

using json = nlohmann::ordered_json;

json row_key(const RoundCostRow& r) {
  return json{{"algorithm", r.algorithm}, {"nranks", r.nranks}, {"bytes", r.bytes}};
}

// A field of row `i`, or Error(InvalidUsage) naming the file, the row and what was expected.
const json& field(const json& row, std::size_t i, const char* name, const std::string& what) {
  const auto it = row.find(name);
  require(it != row.end(), what + ": rows[" + std::to_string(i) + "] has no \"" + name + "\"");
  return *it;
}

double number(const json& row, std::size_t i, const char* name, const std::string& what, double fallback,
              bool required) {
  if (!required && !row.contains(name)) return fallback;
  const json& v = field(row, i, name, what);
  require(v.is_number() && std::isfinite(v.get<double>()),
          what + ": rows[" + std::to_string(i) + "]." + name + " = " + v.dump() + ", expected a finite number");
  return v.get<double>();
}

RoundCostRow parse_row(const json& row, std::size_t i, const std::string& what, bool key_only) {
  require(row.is_object(), what + ": rows[" + std::to_string(i) + "] is not an object");
  RoundCostRow r;
  const json& algo = field(row, i, "algorithm", what);
  require(algo.is_string() && !algo.get<std::string>().empty(),
          what + ": rows[" + std::to_string(i) + "].algorithm = " + algo.dump() + ", expected an algorithm name");
  r.algorithm = algo.get<std::string>();
  const json& n = field(row, i, "nranks", what);
  require(n.is_number_integer() && n.get<long long>() >= 2 && n.get<long long>() <= 1 << 20,
          what + ": rows[" + std::to_string(i) + "].nranks = " + n.dump() + ", expected an integer >= 2");
  r.nranks = n.get<int>();
  const json& b = field(row, i, "bytes", what);
  require(b.is_number_unsigned() && b.get<std::size_t>() > 0,
          what + ": rows[" + std::to_string(i) + "].bytes = " + b.dump() + ", expected a positive integer");
  r.bytes = b.get<std::size_t>();
  if (key_only) return r;
  r.host_s = number(row, i, "host_us_per_round", what, 0, true) * 1e-6;
  require(r.host_s >= 0, what + ": rows[" + std::to_string(i) + "].host_us_per_round = " +
                             row["host_us_per_round"].dump() + ", expected >= 0");
  r.rounds = static_cast<int>(number(row, i, "rounds", what, 0, false));
  r.calls = static_cast<int>(number(row, i, "calls", what, 0, false));
  r.host_min_s = number(row, i, "host_us_per_round_min", what, r.host_s * 1e6, false) * 1e-6;
  r.host_max_s = number(row, i, "host_us_per_round_max", what, r.host_s * 1e6, false) * 1e-6;
  r.gpu_s = number(row, i, "gpu_us_per_round", what, -1e6, false) * 1e-6;
  r.host_call_s = number(row, i, "host_us_per_call", what, 0, false) * 1e-6;
  r.gpu_call_s = number(row, i, "gpu_us_per_call", what, -1e6, false) * 1e-6;
  r.wrong = static_cast<long long>(number(row, i, "wrong", what, 0, false));
  return r;
}

std::string text(const json& doc, const char* name) {
  const auto it = doc.find(name);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The value at `x` of points (x_i, v_i) sorted by x: linear between neighbours, flat beyond.
double interpolate(const std::vector<std::pair<double, double>>& pts, double x) {
  if (x <= pts.front().first) return pts.front().second;
  if (x >= pts.back().first) return pts.back().second;
  const auto hi = std::lower_bound(pts.begin(), pts.end(), x, [](const auto& p, double v) { return p.first < v; });
  const auto lo = hi - 1;
  if (hi->first == x) return hi->second;
  return lo->second + (x - lo->first) / (hi->first - lo->first) * (hi->second - lo->second);
}

}  // namespace

void write_round_costs_json(std::ostream& out, const RoundCostTable& t) {
  json doc{{"format", kRoundCostsFormat},
           {"tool", t.tool},
           {"what", "host time per round of stragglar's executor (on a GPU, its time to enqueue the round) and the "
                    "device's time per round from its events, per algorithm, rank count and buffer size; times in "
                    "microseconds"},
           {"transport", t.transport},
           {"device", t.device},
           {"library", t.library},
           {"date", t.date},
           {"pipeline", t.pipeline},
           {"dtype", "float"},
           {"op", "sum"},
           {"complete", t.complete}};
  json rows = json::array();
  for (const RoundCostRow& r : t.rows) {
    json row = row_key(r);
    row["rounds"] = r.rounds;
    row["calls"] = r.calls;
    row["host_us_per_round"] = r.host_s * 1e6;
    row["host_us_per_round_min"] = r.host_min_s * 1e6;
    row["host_us_per_round_max"] = r.host_max_s * 1e6;
    if (r.gpu_s >= 0) row["gpu_us_per_round"] = r.gpu_s * 1e6;
    row["host_us_per_call"] = r.host_call_s * 1e6;
    if (r.gpu_call_s >= 0) row["gpu_us_per_call"] = r.gpu_call_s * 1e6;
    row["wrong"] = r.wrong;
    rows.push_back(std::move(row));
  }
  doc["rows"] = std::move(rows);
  json skipped = json::array();
  for (const RoundCostRow& r : t.skipped) skipped.push_back(row_key(r));
  doc["skipped"] = std::move(skipped);
  out << doc.dump(1) << "\n";
}

RoundCostTable read_round_costs_json(std::istream& in, const std::string& what) {
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(ErrorCode::InvalidUsage, what + ": not JSON (" + e.what() + ")");
  }
  require(doc.is_object(), what + ": expected a JSON object (" + std::string(kRoundCostsFormat) + ")");
  const std::string format = text(doc, "format");
  require(format == kRoundCostsFormat, what + ": format '" + format + "', expected '" +
                                           std::string(kRoundCostsFormat) + "' (bench_nccl_rounds --json)");
  RoundCostTable t;
  t.tool = text(doc, "tool");
  t.transport = text(doc, "transport");
  t.device = text(doc, "device");
  t.library = text(doc, "library");
  t.date = text(doc, "date");
  if (const auto it = doc.find("pipeline"); it != doc.end() && it->is_number_integer()) t.pipeline = it->get<int>();
  if (const auto it = doc.find("complete"); it != doc.end() && it->is_boolean()) t.complete = it->get<bool>();
  const auto rows = doc.find("rows");
  require(rows != doc.end() && rows->is_array(), what + ": no \"rows\" array");
  for (std::size_t i = 0; i < rows->size(); ++i) t.rows.push_back(parse_row((*rows)[i], i, what, false));
  if (const auto sk = doc.find("skipped"); sk != doc.end() && sk->is_array())
    for (std::size_t i = 0; i < sk->size(); ++i) t.skipped.push_back(parse_row((*sk)[i], i, what + " (skipped)", true));
  return t;
}

RoundCostTable read_round_costs_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "round costs '" + path + "': cannot open the file");
  return read_round_costs_json(in, "round costs '" + path + "'");
}

std::string format_round_costs(const RoundCostTable& t) {
  std::ostringstream o;
  o << "# " << t.tool << ": host time per round of the executor (on a GPU: enqueueing it); " << t.device
    << (t.library.empty() ? "" : ", " + t.library) << "; transport: " << t.transport
    << "; StragglAR K = " << t.pipeline << "\n"
    << "# host: time per round, median over ranks x calls (min..max); gpu: per round from the device's events,\n"
    << "# waits for peers included (it says what the transport costs, not the host)\n";
  o << std::left << std::setw(11) << "algorithm" << std::right << std::setw(4) << "n" << std::setw(11) << "size"
    << std::setw(7) << "rounds" << std::setw(6) << "calls" << std::setw(14) << "host(us/rnd)" << std::setw(22)
    << "(min..max)" << std::setw(14) << "gpu(us/rnd)" << std::setw(15) << "host(us/call)" << std::setw(7) << "wrong"
    << "\n";
  for (const RoundCostRow& r : t.rows) {
    std::ostringstream range;
    range << std::fixed << std::setprecision(1) << "(" << r.host_min_s * 1e6 << ".." << r.host_max_s * 1e6 << ")";
    o << std::fixed << std::setprecision(2) << std::left << std::setw(11) << r.algorithm << std::right << std::setw(4)
      << r.nranks << std::setw(11) << format_bytes(r.bytes) << std::setw(7) << r.rounds << std::setw(6) << r.calls
      << std::setw(14) << r.host_s * 1e6 << std::setw(22) << range.str() << std::setw(14)
      << (r.gpu_s >= 0 ? [&] { std::ostringstream g; g << std::fixed << std::setprecision(1) << r.gpu_s * 1e6; return g.str(); }()
                       : std::string("-"))
      << std::setw(15) << r.host_call_s * 1e6 << std::setw(7) << r.wrong << "\n";
  }
  if (!t.complete) {
    o << "# incomplete: stopped at its deadline; not measured:";
    for (const RoundCostRow& r : t.skipped) o << " " << r.algorithm << "/n=" << r.nranks << "/" << format_bytes(r.bytes);
    o << "\n";
  }
  return o.str();
}

RoundOverhead::RoundOverhead(double host_s) : constant_s_(host_s) {
  require(host_s >= 0 && std::isfinite(host_s),
          "round overhead = " + std::to_string(host_s) + " s, expected a finite time >= 0");
}

RoundOverhead::RoundOverhead(RoundCostTable table) {
  require(!table.rows.empty(), "round costs: the table has no rows, expected at least one measured point");
  table_ = std::make_shared<const RoundCostTable>(std::move(table));
}

double RoundOverhead::host_s(std::string_view algorithm, int nranks, std::size_t bytes) const {
  if (table_ == nullptr) return constant_s_;
  const bool has_algorithm = std::any_of(table_->rows.begin(), table_->rows.end(),
                                         [&](const RoundCostRow& r) { return r.algorithm == algorithm; });
  // n -> bytes -> (sum, count): equal points of several algorithms averaged
  std::map<int, std::map<std::size_t, std::pair<double, int>>> grid;
  for (const RoundCostRow& r : table_->rows) {
    if (has_algorithm && r.algorithm != algorithm) continue;
    auto& cell = grid[r.nranks][r.bytes];
    cell.first += r.host_s;
    cell.second += 1;
  }
  const double x = std::log2(static_cast<double>(std::max<std::size_t>(bytes, 1)));
  std::vector<std::pair<double, double>> by_n;
  for (const auto& [n, sizes] : grid) {
    std::vector<std::pair<double, double>> by_size;
    for (const auto& [b, cell] : sizes) by_size.emplace_back(std::log2(static_cast<double>(b)), cell.first / cell.second);
    by_n.emplace_back(static_cast<double>(n), interpolate(by_size, x));
  }
  return interpolate(by_n, static_cast<double>(nranks));
}

bool RoundOverhead::beyond_table(std::string_view algorithm, int nranks, std::size_t bytes) const {
  if (table_ == nullptr) return false;
  const bool has_algorithm = std::any_of(table_->rows.begin(), table_->rows.end(),
                                         [&](const RoundCostRow& r) { return r.algorithm == algorithm; });
  int n_lo = 0, n_hi = 0;
  std::size_t b_lo = 0, b_hi = 0;
  bool first = true;
  for (const RoundCostRow& r : table_->rows) {
    if (has_algorithm && r.algorithm != algorithm) continue;
    n_lo = first ? r.nranks : std::min(n_lo, r.nranks);
    n_hi = first ? r.nranks : std::max(n_hi, r.nranks);
    b_lo = first ? r.bytes : std::min(b_lo, r.bytes);
    b_hi = first ? r.bytes : std::max(b_hi, r.bytes);
    first = false;
  }
  return nranks < n_lo || nranks > n_hi || bytes < b_lo || bytes > b_hi;
}

std::string RoundOverhead::describe() const {
  std::ostringstream o;
  if (table_ == nullptr) {
    o << constant_s_ * 1e6 << " us per round";
  } else {
    o << "measured per round (" << table_->tool << ": " << (table_->device.empty() ? "device ?" : table_->device)
      << ", " << (table_->transport.empty() ? "transport ?" : table_->transport) << ", " << table_->rows.size()
      << " points" << (table_->complete ? "" : ", incomplete") << ")";
  }
  return o.str();
}

}  // namespace stragglar
