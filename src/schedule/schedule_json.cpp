// "stragglar-schedule/1" reader and writer (format documented in README.md).
#include "stragglar/schedule_json.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

using json = nlohmann::ordered_json;

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorCode::InvalidSchedule, "schedule JSON: " + where + ": " + what);
}

const json& field(const json& obj, const char* key, const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(where, std::string("missing field \"") + key + "\"");
  return *it;
}

void reject_unknown_keys(const json& obj, const std::set<std::string>& known, const std::string& where) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.count(it.key()))
      fail(where, "unknown field \"" + it.key() + "\" (this reader knows format " + kScheduleFormat + ")");
}

int get_int(const json& v, const std::string& where, long long lo, long long hi) {
  if (!v.is_number_integer()) fail(where, "expected an integer, got " + v.dump());
  const long long x = v.get<long long>();
  if (x < lo || x > hi)
    fail(where, std::to_string(x) + " out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

json transfer_to_json(const Transfer& t) {
  return json{{"src", t.src}, {"dst", t.dst}, {"chunks", std::vector<int>(t.chunks.begin(), t.chunks.end())}, {"op", to_string(t.op)}};
}

Transfer transfer_from_json(const json& j, const std::string& where, int nranks, int nchunks) {
  if (!j.is_object()) fail(where, "expected a transfer object {src, dst, chunks, op}");
  reject_unknown_keys(j, {"src", "dst", "chunks", "op"}, where);
  Transfer t;
  t.src = get_int(field(j, "src", where), where + ".src", 0, nranks - 1);
  t.dst = get_int(field(j, "dst", where), where + ".dst", 0, nranks - 1);
  if (t.src == t.dst) fail(where, "src and dst are both " + std::to_string(t.src) + ", expected two different ranks");
  const json& chunks = field(j, "chunks", where);
  if (!chunks.is_array() || chunks.empty()) fail(where + ".chunks", "expected a non-empty array of chunk indices");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const int c = get_int(chunks[i], where + ".chunks[" + std::to_string(i) + "]", 0, nchunks - 1);
    if (!t.chunks.empty() && c <= t.chunks.back())
      fail(where + ".chunks", "chunk indices must be strictly ascending, got " + chunks.dump());
    t.chunks.push_back(c);
  }
  const json& op = field(j, "op", where);
  if (op == "reduce") t.op = TransferOp::reduce;
  else if (op == "copy") t.op = TransferOp::copy;
  else fail(where + ".op", op.dump() + ", expected \"reduce\" or \"copy\"");
  return t;
}

}  // namespace

std::string schedule_to_json(const Schedule& s, int indent) {
  json j;
  j["format"] = kScheduleFormat;
  j["algorithm"] = s.algorithm;
  j["nranks"] = s.nranks;
  j["straggler"] = s.straggler ? json(*s.straggler) : json(nullptr);
  j["nchunks"] = s.nchunks;
  j["ports"] = s.ports == kAllPorts ? json("all") : json(s.ports);
  json phases = json::array();
  for (const Phase& p : s.phases) {
    json rounds = json::array();
    for (const Round& r : p.rounds) {
      json transfers = json::array();
      for (const Transfer& t : r) transfers.push_back(transfer_to_json(t));
      rounds.push_back(std::move(transfers));
    }
    phases.push_back(json{{"name", p.name}, {"waits_for_straggler", p.waits_for_straggler}, {"rounds", std::move(rounds)}});
  }
  j["phases"] = std::move(phases);
  return j.dump(indent);
}

Schedule schedule_from_json(const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::InvalidSchedule, std::string("schedule JSON: not valid JSON: ") + e.what());
  }
  const std::string top = "top level";
  if (!j.is_object()) fail(top, "expected an object, got " + std::string(j.type_name()));
  reject_unknown_keys(j, {"format", "algorithm", "nranks", "straggler", "nchunks", "ports", "phases"}, top);
  const json& format = field(j, "format", top);
  if (format != kScheduleFormat) fail("format", format.dump() + ", expected \"" + kScheduleFormat + "\"");

  Schedule s;
  const json& algorithm = field(j, "algorithm", top);
  if (!algorithm.is_string() || algorithm.get<std::string>().empty()) fail("algorithm", "expected a non-empty string");
  s.algorithm = algorithm.get<std::string>();
  s.nranks = get_int(field(j, "nranks", top), "nranks", 2, 1 << 20);
  const json& straggler = field(j, "straggler", top);
  if (!straggler.is_null()) s.straggler = get_int(straggler, "straggler", 0, s.nranks - 1);
  s.nchunks = get_int(field(j, "nchunks", top), "nchunks", 1, 1 << 24);
  const json& ports = field(j, "ports", top);
  if (ports == "all") s.ports = kAllPorts;
  else if (ports == 1) s.ports = 1;
  else fail("ports", ports.dump() + ", expected 1 or \"all\"");

  const json& phases = field(j, "phases", top);
  if (!phases.is_array()) fail("phases", "expected an array");
  for (std::size_t pi = 0; pi < phases.size(); ++pi) {
    const std::string pw = "phases[" + std::to_string(pi) + "]";
    const json& pj = phases[pi];
    if (!pj.is_object()) fail(pw, "expected a phase object {name, waits_for_straggler, rounds}");
    reject_unknown_keys(pj, {"name", "waits_for_straggler", "rounds"}, pw);
    Phase p;
    const json& name = field(pj, "name", pw);
    if (!name.is_string()) fail(pw + ".name", "expected a string");
    p.name = name.get<std::string>();
    const json& waits = field(pj, "waits_for_straggler", pw);
    if (!waits.is_boolean()) fail(pw + ".waits_for_straggler", waits.dump() + ", expected true or false");
    p.waits_for_straggler = waits.get<bool>();
    if (!p.waits_for_straggler && !s.straggler)
      fail(pw, "waits_for_straggler is false but the schedule names no straggler");
    const json& rounds = field(pj, "rounds", pw);
    if (!rounds.is_array()) fail(pw + ".rounds", "expected an array of rounds");
    for (std::size_t ri = 0; ri < rounds.size(); ++ri) {
      const std::string rw = pw + ".rounds[" + std::to_string(ri) + "]";
      if (!rounds[ri].is_array()) fail(rw, "expected an array of transfers");
      Round r;
      for (std::size_t ti = 0; ti < rounds[ri].size(); ++ti)
        r.push_back(transfer_from_json(rounds[ri][ti], rw + "[" + std::to_string(ti) + "]", s.nranks, s.nchunks));
      p.rounds.push_back(std::move(r));
    }
    s.phases.push_back(std::move(p));
  }
  return s;
}

}  // namespace stragglar
