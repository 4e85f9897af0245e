// "stragglar-schedule/1" reader and writer (format documented in README.md).
#include "stragglar/schedule_json.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>

#include "schedule/schedule_json_stream.hpp"
#include "schedule/schedule_sink.hpp"
#include "stragglar/error.hpp"
#include "stragglar/synthesize.hpp"
#include "synth/synth_internal.hpp"

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


// ---- Streaming reader (the fast path of schedule_json_stream.hpp) -------------------------

// An input iterator over a FILE with a 1 MiB buffer: nlohmann's own FILE adapter reads a
// character at a time.
class FileChars {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;
  struct Buffer {
    std::FILE* file = nullptr;
    std::vector<char> data = std::vector<char>(std::size_t{1} << 20);
    const char* end = nullptr;
    // The first character of the next stretch, or nullptr at the end of the file.
    const char* fill() {
      const std::size_t got = std::fread(data.data(), 1, data.size(), file);
      end = data.data() + got;
      return got > 0 ? data.data() : nullptr;
    }
  };
  FileChars() = default;
  explicit FileChars(Buffer* b) : b_(b), p_(b->fill()) {}
  const char& operator*() const { return *p_; }
  FileChars& operator++() {
    if (++p_ == b_->end) p_ = b_->fill();
    return *this;
  }
  FileChars operator++(int) {
    FileChars old = *this;
    ++*this;
    return old;
  }
  bool operator==(const FileChars& o) const { return p_ == o.p_; }
  bool operator!=(const FileChars& o) const { return p_ != o.p_; }

 private:
  Buffer* b_ = nullptr;
  const char* p_ = nullptr;  // nullptr: the end
};

// The SAX handler: a state machine over the shape this library writes; any other event ends
// the fast path (returns false, and the caller falls back on the full reader).
class PackingReader {
 public:
  using number_integer_t = json::number_integer_t;
  using number_unsigned_t = json::number_unsigned_t;
  using number_float_t = json::number_float_t;
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  explicit PackingReader(detail::PackedScheduleBuilder& out) : out_(out) {}
  bool done() const { return at_ == At::done; }

  bool null() {
    if (at_ == At::top_value && field_ == Field::straggler) return header_value([&] { straggler_seen_ = true; return true; });
    return false;
  }
  bool boolean(bool v) {
    if (at_ != At::phase_value || field_ != Field::waits) return false;
    waits_ = v;
    if (!v && !header_.straggler) return false;  // the full reader names this error
    seen_ |= bit(Field::waits);
    at_ = At::phase_key;
    return true;
  }
  bool number_integer(number_integer_t v) { return integer(static_cast<long long>(v), v >= 0); }
  bool number_unsigned(number_unsigned_t v) {
    return v <= static_cast<number_unsigned_t>(std::numeric_limits<int>::max()) && integer(static_cast<long long>(v), true);
  }
  bool number_float(number_float_t, const string_t&) { return false; }
  bool binary(binary_t&) { return false; }
  bool string(string_t& v) {
    if (at_ == At::top_value) {
      if (field_ == Field::format) return header_value([&] { return v == kScheduleFormat; });
      if (field_ == Field::algorithm) return header_value([&] { header_.algorithm = v; return !v.empty(); });
      if (field_ == Field::ports) return header_value([&] { header_.ports = kAllPorts; return v == "all"; });
      return false;
    }
    if (at_ == At::phase_value && field_ == Field::name) {
      name_ = v;
      seen_ |= bit(Field::name);
      at_ = At::phase_key;
      return true;
    }
    if (at_ == At::transfer_value && field_ == Field::op) {
      if (v == "reduce") op_ = TransferOp::reduce;
      else if (v == "copy") op_ = TransferOp::copy;
      else return false;
      seen_ |= bit(Field::op);
      at_ = At::transfer_key;
      return true;
    }
    return false;
  }
  bool start_object(std::size_t) {
    if (at_ == At::start) at_ = At::top_key;
    else if (at_ == At::phases) at_ = At::phase_key, seen_ = 0;
    else if (at_ == At::round) at_ = At::transfer_key, seen_ = 0, chunks_.clear();
    else return false;
    return true;
  }
  bool key(string_t& k) {
    if (at_ == At::top_key) {
      const Field f = k == "format" ? Field::format : k == "algorithm" ? Field::algorithm : k == "nranks" ? Field::nranks
                    : k == "straggler" ? Field::straggler : k == "nchunks" ? Field::nchunks : k == "ports" ? Field::ports
                    : k == "phases" ? Field::phases : Field::none;
      if (f == Field::none || (header_seen_ & bit(f))) return false;
      header_seen_ |= bit(f);
      field_ = f;
      at_ = At::top_value;
      if (f != Field::phases) return true;
      // Every header field first, with values the full reader accepts (straggler needs nranks).
      const unsigned all = bit(Field::format) | bit(Field::algorithm) | bit(Field::nranks) | bit(Field::straggler) |
                               bit(Field::nchunks) | bit(Field::ports) | bit(Field::phases);
      if (header_seen_ != all || !straggler_seen_) return false;
      if (header_.straggler && (*header_.straggler < 0 || *header_.straggler >= header_.nranks)) return false;
      out_.begin(header_);
      return true;
    }
    if (at_ == At::phase_key) {
      const Field f = k == "name" ? Field::name : k == "waits_for_straggler" ? Field::waits : k == "rounds" ? Field::rounds : Field::none;
      if (f == Field::none || (seen_ & bit(f))) return false;
      if (f == Field::rounds && seen_ != (bit(Field::name) | bit(Field::waits))) return false;
      field_ = f;
      at_ = At::phase_value;
      return true;
    }
    if (at_ == At::transfer_key) {
      const Field f = k == "src" ? Field::src : k == "dst" ? Field::dst : k == "chunks" ? Field::chunks : k == "op" ? Field::op : Field::none;
      if (f == Field::none || (seen_ & bit(f))) return false;
      field_ = f;
      at_ = At::transfer_value;
      return true;
    }
    return false;
  }
  bool end_object() {
    if (at_ == At::transfer_key) {
      const unsigned all = bit(Field::src) | bit(Field::dst) | bit(Field::chunks) | bit(Field::op);
      if (seen_ != all || src_ == dst_ || chunks_.empty()) return false;
      out_.add_transfer(src_, dst_, chunks_, op_);
      at_ = At::round;
      return true;
    }
    if (at_ == At::phase_done) return (at_ = At::phases), true;
    if (at_ == At::top_done) return (at_ = At::done), true;
    return false;
  }
  bool start_array(std::size_t) {
    if (at_ == At::top_value && field_ == Field::phases) at_ = At::phases;
    else if (at_ == At::phase_value && field_ == Field::rounds) out_.begin_phase(name_, waits_), at_ = At::rounds;
    else if (at_ == At::rounds) at_ = At::round;
    else if (at_ == At::transfer_value && field_ == Field::chunks) at_ = At::chunks;
    else return false;
    return true;
  }
  bool end_array() {
    if (at_ == At::chunks) {
      seen_ |= bit(Field::chunks);
      at_ = At::transfer_key;
    } else if (at_ == At::round) {
      out_.end_round();
      at_ = At::rounds;
    } else if (at_ == At::rounds) {
      at_ = At::phase_done;  // no field may follow "rounds"
    } else if (at_ == At::phases) {
      at_ = At::top_done;  // nor "phases"
    } else {
      return false;
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  enum class At { start, top_key, top_value, phases, phase_key, phase_value, rounds, round, transfer_key,
                  transfer_value, chunks, phase_done, top_done, done };
  enum class Field : unsigned { none, format, algorithm, nranks, straggler, nchunks, ports, phases, name, waits, rounds,
                                src, dst, chunks, op };
  static constexpr unsigned bit(Field f) { return 1U << static_cast<unsigned>(f); }

  template <class F>
  bool header_value(F&& accept) {
    at_ = At::top_key;
    return accept();
  }
  bool integer(long long v, bool non_negative) {
    if (at_ == At::chunks) {  // in range and ascending, as the full reader demands
      if (!non_negative || v >= header_.nchunks || (!chunks_.empty() && v <= chunks_.back())) return false;
      chunks_.push_back(static_cast<int>(v));
      return true;
    }
    if (at_ == At::transfer_value && (field_ == Field::src || field_ == Field::dst)) {
      if (!non_negative || v >= header_.nranks) return false;
      (field_ == Field::src ? src_ : dst_) = static_cast<int>(v);
      seen_ |= bit(field_);
      at_ = At::transfer_key;
      return true;
    }
    if (at_ != At::top_value) return false;
    switch (field_) {
      case Field::nranks:  // the packed form holds ranks in 16 bits
        return header_value([&] { header_.nranks = static_cast<int>(v); return v >= 2 && v <= detail::kMaxPackedRanks; });
      case Field::straggler:
        return header_value([&] { straggler_seen_ = true; header_.straggler = static_cast<int>(v); return non_negative; });
      case Field::nchunks:
        return header_value([&] { header_.nchunks = static_cast<int>(v); return v >= 1 && v <= (1 << 24); });
      case Field::ports:
        return header_value([&] { header_.ports = 1; return v == 1; });
      default:
        return false;
    }
  }

  detail::PackedScheduleBuilder& out_;
  At at_ = At::start;
  Field field_ = Field::none;
  detail::ScheduleHeader header_;
  unsigned header_seen_ = 0, seen_ = 0;
  bool straggler_seen_ = false;
  std::string name_;
  bool waits_ = true;
  int src_ = 0, dst_ = 0;
  std::vector<int> chunks_;
  TransferOp op_ = TransferOp::reduce;
};

// ---- Streaming writer ------------------------------------------------------------------------
//
// The same text as nlohmann's dump() of the document schedule_to_json builds (compact, or
// pretty with `indent` spaces a level; "[]" for an empty array), written as the rounds come.
class JsonWriter final : public detail::ScheduleSink {
 public:
  JsonWriter(std::ostream& out, int indent) : out_(out), indent_(indent) { buf_.reserve(kFlush + 4096); }

  void begin(const detail::ScheduleHeader& h) override {
    open('{');
    field("format", false);
    buf_ += json(kScheduleFormat).dump();
    field("algorithm", true);
    buf_ += json(h.algorithm).dump();
    field("nranks", true);
    number(h.nranks);
    field("straggler", true);
    if (h.straggler) number(*h.straggler);
    else buf_ += "null";
    if (!h.stragglers.empty()) {  // several late ranks; absent otherwise
      field("stragglers", true);
      buf_ += json(h.stragglers).dump();
    }
    field("nchunks", true);
    number(h.nchunks);
    field("ports", true);
    if (h.ports == kAllPorts) buf_ += "\"all\"";
    else number(h.ports);
    field("phases", true);
    open('[');
  }
  void begin_phase(const std::string& name, bool waits) override {
    if (in_phase_) close_phase();
    element();
    open('{');  // level 2: the phase
    field("name", false);
    buf_ += json(name).dump();
    field("waits_for_straggler", true);
    buf_ += waits ? "true" : "false";
    field("rounds", true);
    open('[');  // level 3: rounds
    in_phase_ = true;
  }
  void add_round(Round& round) override {
    element();
    open('[');  // level 4: transfers
    for (const Transfer& t : round) {
      element();
      open('{');  // level 5: the transfer
      field("src", false);
      number(t.src);
      field("dst", true);
      number(t.dst);
      field("chunks", true);
      open('[');  // level 6
      for (int c : t.chunks) {
        element();
        number(c);
      }
      close(']');
      field("op", true);
      buf_ += t.op == TransferOp::reduce ? "\"reduce\"" : "\"copy\"";
      close('}');
    }
    close(']');
    if (buf_.size() >= kFlush) flush();
  }
  void end() override {
    if (in_phase_) close_phase();
    close(']');  // phases
    close('}');
    flush();
  }

 private:
  static constexpr std::size_t kFlush = std::size_t{1} << 20;

  void flush() {
    out_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    if (!out_) throw Error(ErrorCode::InvalidUsage, "cannot write the schedule JSON (output failed)");
    buf_.clear();
  }
  void newline(int level) {
    buf_ += '\n';
    buf_.append(static_cast<std::size_t>(indent_ * level), ' ');
  }
  // depth_ counts the open containers; the fields and elements of the innermost sit at depth_.
  void open(char bracket) {
    buf_ += bracket;
    first_[static_cast<std::size_t>(++depth_)] = true;
  }
  void field(const char* key, bool comma) {
    if (comma) buf_ += ',';
    if (indent_ >= 0) newline(depth_);
    buf_ += '"';
    buf_ += key;
    buf_ += indent_ >= 0 ? "\": " : "\":";
  }
  void element() {
    bool& first = first_[static_cast<std::size_t>(depth_)];
    if (!first) buf_ += ',';
    first = false;
    if (indent_ >= 0) newline(depth_);
  }
  // An empty array is "[]"; the others close on a line of their own when pretty.
  void close(char bracket) {
    const bool empty = bracket == ']' && first_[static_cast<std::size_t>(depth_)];
    --depth_;
    if (indent_ >= 0 && !empty) newline(depth_);
    buf_ += bracket;
  }
  void close_phase() {
    close(']');  // rounds
    close('}');
    in_phase_ = false;
  }
  void number(int v) {
    char tmp[16];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
  }

  std::ostream& out_;
  int indent_;
  std::string buf_;
  int depth_ = 0;
  bool first_[8] = {};  // per depth: no element written yet
  bool in_phase_ = false;
};

}  // namespace

std::string schedule_to_json(const Schedule& s, int indent) {
  json j;
  j["format"] = kScheduleFormat;
  j["algorithm"] = s.algorithm;
  j["nranks"] = s.nranks;
  j["straggler"] = s.straggler ? json(*s.straggler) : json(nullptr);
  if (!s.stragglers.empty()) j["stragglers"] = s.stragglers;  // several late ranks
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
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e999
    throw Error(ErrorCode::InvalidSchedule, std::string("schedule JSON: not valid JSON: ") + e.what());
  }
  const std::string top = "top level";
  if (!j.is_object()) fail(top, "expected an object, got " + std::string(j.type_name()));
  reject_unknown_keys(j, {"format", "algorithm", "nranks", "straggler", "stragglers", "nchunks", "ports", "phases"}, top);
  const json& format = field(j, "format", top);
  if (format != kScheduleFormat) fail("format", format.dump() + ", expected \"" + kScheduleFormat + "\"");

  Schedule s;
  const json& algorithm = field(j, "algorithm", top);
  if (!algorithm.is_string() || algorithm.get<std::string>().empty()) fail("algorithm", "expected a non-empty string");
  s.algorithm = algorithm.get<std::string>();
  s.nranks = get_int(field(j, "nranks", top), "nranks", 2, 1 << 20);
  const json& straggler = field(j, "straggler", top);
  if (!straggler.is_null()) s.straggler = get_int(straggler, "straggler", 0, s.nranks - 1);
  if (j.contains("stragglers")) {  // optional: a set of at least two late ranks
    const json& set = j["stragglers"];
    if (!set.is_array() || set.size() < 2) fail("stragglers", set.dump() + ", expected an array of at least two ranks");
    if (s.straggler) fail("stragglers", "given together with straggler " + std::to_string(*s.straggler) +
                                            ", expected straggler: null when stragglers names the set");
    for (std::size_t i = 0; i < set.size(); ++i)
      s.stragglers.push_back(get_int(set[i], "stragglers[" + std::to_string(i) + "]", 0, s.nranks - 1));
    std::sort(s.stragglers.begin(), s.stragglers.end());
    if (std::adjacent_find(s.stragglers.begin(), s.stragglers.end()) != s.stragglers.end())
      fail("stragglers", set.dump() + ", expected distinct ranks");
  }
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
    if (!p.waits_for_straggler && !s.straggler && s.stragglers.empty())
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

namespace detail {

bool read_packed_json(std::FILE* in, PackedScheduleBuilder& out) {
  FileChars::Buffer buffer;
  buffer.file = in;
  PackingReader reader(out);
  try {
    return json::sax_parse(FileChars(&buffer), FileChars(), &reader) && reader.done();
  } catch (const Error&) {  // the packed form cannot hold it: the full reader decides
    return false;
  } catch (const json::exception&) {  // likewise
    return false;
  }
}

}  // namespace detail

void write_schedule_json(std::ostream& out, const Schedule& s, int indent) {
  JsonWriter writer(out, indent);
  detail::emit(s, writer);
}

void synthesize_json(std::ostream& out, Algorithm algo, int nranks, const SynthOptions& opts, int indent) {
  JsonWriter writer(out, indent);
  const int straggler = opts.straggler.value_or(nranks - 1);
  // StragglAR with arguments synthesize() accepts streams round by round; everything else
  // (other algorithms, and bad arguments, for synthesize()'s messages) goes through synthesize().
  const bool stream = algo == Algorithm::stragglar && opts.stragglers.empty() && nranks >= kMinRanks && nranks <= kMaxRanks && straggler >= 0 &&
                      straggler < nranks && opts.pipeline >= 0 && opts.pipeline <= kMaxPipeline;
  if (!stream) {
    detail::emit(synthesize(algo, nranks, opts), writer);
    return;
  }
  // As synthesize_stragglar: K resolved, synthesized with the straggler at n-1, relabelled.
  const int k = opts.pipeline == kPipelineAuto ? choose_pipeline(nranks, opts.bytes, opts.cost) : opts.pipeline;
  if (straggler == nranks - 1) {
    detail::emit_stragglar(nranks, k, writer);
  } else {
    const std::vector<int> perm = detail::straggler_relabeling(nranks, straggler);
    detail::RelabelingSink relabeled(perm, writer);
    detail::emit_stragglar(nranks, k, relabeled);
  }
}

}  // namespace stragglar
