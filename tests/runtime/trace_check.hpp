// Reads the per-rank trace files of one communicator (src/runtime/call_trace.hpp) for the trace
// tests (threads engine and MPI): every rank's calls by call index, and what the files must
// satisfy whatever the job — both files parse, the Chrome trace has one slice per call on its
// rank, and on one clock every rank leaves a call after the last rank entered it.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace stragglar::testing {

struct TracedCall {
  std::int64_t entry_ns = 0, exit_ns = 0;
  std::string algorithm, reason;
  int straggler = -1;
};

struct RankTrace {
  nlohmann::json header;
  std::vector<TracedCall> calls;  // by call index
  bool shared_clock = false;      // the end line's
};

// The communicator number of the one PREFIX.c<C>.r0.jsonl there is (a process numbers its
// communicators of one rank and size in creation order: a test's earlier jobs took the lower ones).
inline int only_comm(const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path p(prefix);
  const std::string stem = p.filename().string() + ".c";
  int comm = -1;
  for (const auto& entry : fs::directory_iterator(p.parent_path())) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) == 0 && name.size() > stem.size() + 9 && name.substr(name.size() - 9) == ".r0.jsonl")
      comm = std::stoi(name.substr(stem.size()));
  }
  return comm;
}

// Reads PREFIX.c<comm>.r<rank>.{jsonl,json}; appends what is wrong to `problems`.
inline RankTrace read_rank_trace(const std::string& prefix, int comm, int rank, std::string& problems) {
  RankTrace t;
  const std::string base = prefix + ".c" + std::to_string(comm) + ".r" + std::to_string(rank);
  std::ifstream lines(base + ".jsonl");
  if (!lines) {
    problems += "no file " + base + ".jsonl\n";
    return t;
  }
  std::string line;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      problems += base + ".jsonl: a line is not JSON: " + line + "\n";
      continue;
    }
    const std::string type = j.value("type", "");
    if (type == "header") t.header = j;
    if (type == "end") t.shared_clock = j.value("shared_clock", false);
    if (type == "call") {
      const auto i = j.at("call").get<std::size_t>();
      if (i != t.calls.size()) problems += base + ".jsonl: call " + std::to_string(i) + " out of order\n";
      t.calls.push_back({j.at("entry_ns").get<std::int64_t>(), j.at("exit_ns").get<std::int64_t>(),
                         j.at("algorithm").get<std::string>(), j.at("reason").get<std::string>(),
                         j.at("straggler").get<int>()});
    }
  }
  if (t.header.is_null()) problems += base + ".jsonl: no header line\n";
  std::ifstream chrome_file(base + ".json");
  std::stringstream text;
  text << chrome_file.rdbuf();
  const nlohmann::json chrome = nlohmann::json::parse(text.str(), nullptr, false);
  if (chrome.is_discarded() || !chrome.is_array()) {
    problems += base + ".json is not a Chrome trace (a JSON array of events)\n";
    return t;
  }
  std::size_t slices = 0;
  for (const auto& e : chrome)
    if (e.value("ph", "") == "X") {
      ++slices;
      if (e.value("pid", -1) != rank) problems += base + ".json: a slice not on pid " + std::to_string(rank) + "\n";
      if (!e.contains("ts") || !e.contains("dur")) problems += base + ".json: a slice without ts/dur\n";
    }
  if (slices != t.calls.size())
    problems += base + ".json: " + std::to_string(slices) + " slices for " + std::to_string(t.calls.size()) + " calls\n";
  return t;
}

// Per call, the rank that entered last (on one clock); -1 where the ranks have different counts.
// Appends to `problems` every call some rank left before the last rank entered it.
inline std::vector<int> late_rank_per_call(const std::vector<RankTrace>& ranks, std::string& problems) {
  std::vector<int> late;
  if (ranks.empty()) return late;
  const std::size_t calls = ranks.front().calls.size();
  for (const RankTrace& r : ranks)
    if (r.calls.size() != calls) {
      problems += "ranks traced different numbers of calls\n";
      return late;
    }
  for (std::size_t c = 0; c < calls; ++c) {
    int last = 0;
    for (std::size_t r = 1; r < ranks.size(); ++r)
      if (ranks[r].calls[c].entry_ns > ranks[static_cast<std::size_t>(last)].calls[c].entry_ns) last = static_cast<int>(r);
    const std::int64_t last_entry = ranks[static_cast<std::size_t>(last)].calls[c].entry_ns;
    for (std::size_t r = 0; r < ranks.size(); ++r)
      if (ranks[r].calls[c].exit_ns < last_entry)
        problems += "call " + std::to_string(c) + ": rank " + std::to_string(r) + " left before rank " +
                    std::to_string(last) + " entered\n";
    late.push_back(last);
  }
  return late;
}

}  // namespace stragglar::testing
