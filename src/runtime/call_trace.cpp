// A trace of every call of one communicator (call_trace.hpp; docs/trace.md).
#include "runtime/call_trace.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "runtime/auto_runner.hpp"
#include "runtime/engine.hpp"
#include "runtime/env.hpp"
#include "stragglar/error.hpp"
#include "stragglar/simulate.hpp"

namespace stragglar::detail {
namespace {

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Everything the process shares: the path set by set_trace_path, the open traces (written at
// exit), the communicator numbers. Leaked on purpose: exit handlers and late destructors use it.
struct Registry {
  std::mutex mutex;
  bool path_set = false;
  std::string path;
  std::vector<CallTrace*> open;
  std::map<std::pair<int, int>, int> comms;  // (rank, nranks) → communicators made so far
  bool exit_hook = false;
};
Registry& registry() {
  static auto* r = new Registry();
  return *r;
}

void flush_all_at_exit() {
  Registry& reg = registry();
  std::vector<CallTrace*> open;
  {
    const std::lock_guard<std::mutex> lock(reg.mutex);
    open = reg.open;
  }
  for (CallTrace* t : open) t->close();
}

std::atomic<bool> g_error_printed{false};

// A string as a JSON string literal (api names and paths: no control characters expected).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  }
  return out + "\"";
}

// A finite number, or null (JSON has no NaN).
void number(std::FILE* f, double v) {
  if (std::isfinite(v))
    std::fprintf(f, "%.9g", v);
  else
    std::fputs("null", f);
}

// Text built with std::to_chars and written in one piece (the writer's formatting).
class Text {
 public:
  Text() { s_.reserve(std::size_t{1} << 16); }
  Text& add(const char* text) {
    s_ += text;
    return *this;
  }
  Text& add(std::int64_t v) {
    char b[24];
    const auto res = std::to_chars(b, b + sizeof b, v);
    s_.append(b, res.ptr);
    return *this;
  }
  Text& add(int v) { return add(static_cast<std::int64_t>(v)); }
  Text& add_number(double v) {  // shortest exact form; null where not finite (JSON has no NaN)
    if (!std::isfinite(v)) return add("null");
    char b[32];
    const auto res = std::to_chars(b, b + sizeof b, v);
    s_.append(b, res.ptr);
    return *this;
  }
  Text& add_us(std::int64_t ns) {  // ns as µs with three decimals, exactly
    if (ns < 0) {
      s_ += '-';
      ns = -ns;
    }
    add(ns / 1000);
    const auto frac = static_cast<int>(ns % 1000);
    const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                            static_cast<char>('0' + frac % 10)};
    s_.append(digits, 4);
    return *this;
  }
  Text& late_set(const CallRecord& r) {
    s_ += '[';
    for (int k = 0; k < std::min<int>(r.late_count, CallRecord::kMaxLate); ++k) {
      if (k) s_ += ',';
      add(static_cast<int>(r.late[k]));
    }
    s_ += ']';
    return *this;
  }
  // "stragglar (straggler 7)", "stragglar-k (late 6,7)", "ring", "failed call".
  Text& name(const CallRecord& r, const char* alg) {
    if (r.reason == TraceReason::empty) return add("empty call");
    if (r.reason == TraceReason::failed && r.algorithm < 0) return add("failed call");
    add(alg);
    if (r.late_count > 0) {
      add(" (late ");
      for (int i = 0; i < std::min<int>(r.late_count, CallRecord::kMaxLate); ++i) {
        if (i) s_ += ',';
        add(static_cast<int>(r.late[i]));
      }
      add(r.late_count > CallRecord::kMaxLate ? ",...)" : ")");
    } else if (r.straggler >= 0) {
      add(" (straggler ").add(static_cast<int>(r.straggler)).add(")");
    }
    return *this;
  }
  std::size_t size() const noexcept { return s_.size(); }
  void write_to(std::FILE* f) {
    std::fwrite(s_.data(), 1, s_.size(), f);
    s_.clear();
  }

 private:
  std::string s_;
};

// auto's model of a configuration: the exposed time of StragglAR (its straggler the last rank)
// with nobody late and with the straggler late for ever — its exposed time at delay d is
// max(at_zero − d, at_infinity), the formula of auto_runner.cpp's PredictionCache — and the best
// bulk-synchronous schedule (ring, rhd) with nobody late, as which native is modelled.
struct Model {
  double at_zero = std::numeric_limits<double>::quiet_NaN();
  double at_infinity = std::numeric_limits<double>::quiet_NaN();
  double bulk = std::numeric_limits<double>::quiet_NaN();
};
Model model_of(const Options& o, int nranks, std::size_t bytes) {
  Model m;
  if (nranks < 2 || bytes == 0 || nranks > 256) return m;  // beyond 256 ranks: not simulated (time)
  Options x = o;
  x.stragglers.clear();
  x.straggler = nranks - 1;
  Delay none, late;
  late.seconds = 1e4;
  try {
    x.algorithm = Algorithm::stragglar;
    const auto s = schedule_for(x, nranks, bytes);
    m.at_zero = simulate(*s, bytes, *x.cost, none).exposed_s;
    m.at_infinity = simulate(*s, bytes, *x.cost, late).exposed_s;
    double bulk = std::numeric_limits<double>::infinity();
    for (Algorithm a : {Algorithm::ring, Algorithm::rhd}) {
      x.algorithm = a;
      x.straggler = -1;
      bulk = std::min(bulk, simulate(*schedule_for(x, nranks, bytes), bytes, *x.cost, none).exposed_s);
    }
    m.bulk = bulk;
  } catch (const std::exception&) {
    // No schedule for this size or count of ranks: the model stays unknown (null in the trace).
  }
  return m;
}

}  // namespace

const char* to_string(TraceReason r) noexcept {
  switch (r) {
    case TraceReason::requested: return "requested";
    case TraceReason::auto_small: return "auto_small_message";
    case TraceReason::auto_first: return "auto_first_call";
    case TraceReason::auto_decided: return "auto_decided";
    case TraceReason::auto_explore: return "auto_explore";
    case TraceReason::failed: return "failed";
    case TraceReason::empty: return "empty";
  }
  return "?";
}

std::string trace_path() {
  Registry& reg = registry();
  {
    const std::lock_guard<std::mutex> lock(reg.mutex);
    if (reg.path_set) return reg.path;
  }
  return env().trace_path;
}

std::unique_ptr<CallTrace> CallTrace::open(const Engine& engine, const char* api, int rank, int nranks) {
  std::string prefix = trace_path();
  if (prefix.empty()) return nullptr;
  struct stat st {};
  if (prefix.back() == '/' || (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    if (prefix.back() != '/') prefix.push_back('/');
    prefix.append("trace");
  }
  Registry& reg = registry();
  int comm = 0;
  {
    const std::lock_guard<std::mutex> lock(reg.mutex);
    comm = reg.comms[{rank, nranks}]++;
    if (!reg.exit_hook) {
      reg.exit_hook = true;
      std::atexit(flush_all_at_exit);
    }
  }
  std::string base = prefix;
  base.append(".c").append(std::to_string(comm)).append(".r").append(std::to_string(rank));
  const std::string jsonl_path = base + ".jsonl", chrome_path = base + ".json";
  std::FILE* jsonl = std::fopen(jsonl_path.c_str(), "w");
  const int jsonl_errno = errno;
  std::FILE* chrome = jsonl ? std::fopen(chrome_path.c_str(), "w") : nullptr;
  if (!jsonl || !chrome) {
    const std::string failed = jsonl ? chrome_path : jsonl_path;
    const int err = jsonl ? errno : jsonl_errno;
    if (jsonl) std::fclose(jsonl);
    if (!g_error_printed.exchange(true))
      std::fprintf(stderr,
                   "stragglar ERROR: STRAGGLAR_TRACE='%s': cannot write the trace file '%s' (%s); expected a "
                   "writable directory or file prefix. This job runs without a trace.\n",
                   trace_path().c_str(), failed.c_str(), std::strerror(err));
    return nullptr;
  }
  std::unique_ptr<CallTrace> t(new CallTrace(jsonl, chrome, engine, api, rank, nranks, comm));
  const std::lock_guard<std::mutex> lock(reg.mutex);
  reg.open.push_back(t.get());
  return t;
}

CallTrace::CallTrace(std::FILE* jsonl, std::FILE* chrome, const Engine& engine,
                     const char* api, int rank, int nranks, int comm)
    : jsonl_(jsonl), chrome_(chrome), api_(api), rank_(rank), nranks_(nranks),
      comm_(comm), host_id_(engine.host_id()), clock_id_(engine.clock_id()),
      buffers_{std::make_unique<CallRecord[]>(kCapacity), std::make_unique<CallRecord[]>(kCapacity)},
      records_(buffers_[0].get()) {
  configs_.reserve(16);
}

CallTrace::~CallTrace() {
  {
    Registry& reg = registry();
    const std::lock_guard<std::mutex> lock(reg.mutex);
    reg.open.erase(std::remove(reg.open.begin(), reg.open.end(), this), reg.open.end());
  }
  close();
}

std::int32_t CallTrace::config_of(std::size_t count, DataType dtype, ReduceOp op, const Options& o,
                                  const Engine& engine, int ranks_per_host) noexcept {
  const int alg = static_cast<int>(o.algorithm);
  // The last configuration first: a job calls one configuration many times in a row.
  for (std::size_t i = configs_.size(); i-- > 0;) {
    const Config& c = configs_[i];
    if (c.count == count && c.dtype == static_cast<int>(dtype) && c.op == static_cast<int>(op) && c.algorithm == alg &&
        c.straggler == o.straggler && c.pipeline == o.pipeline)
      return static_cast<std::int32_t>(i);
  }
  try {  // a configuration's first call: it allocates anyway (plans, scratch)
    const Options ao = with_auto_cost(o, engine, ranks_per_host);
    const Model m = model_of(ao, nranks_, count * size_of(dtype));
    const std::lock_guard<std::mutex> lock(mutex_);  // the writer reads configs_
    configs_.push_back({count, static_cast<int>(dtype), static_cast<int>(op), alg, o.straggler, o.pipeline,
                        m.at_zero, m.at_infinity, m.bulk, *ao.cost});
    return static_cast<std::int32_t>(configs_.size() - 1);
  } catch (...) {
    return -1;
  }
}

CallTrace::Call::Call(CallTrace* trace, std::size_t count, DataType dtype, ReduceOp op, const Options& o) noexcept
    : trace_(trace), count_(count), dtype_(dtype), op_(op), options_(o) {
  if (trace_) entry_ns_ = now_ns();
}

void CallTrace::Call::done(const Choice& ran, const AutoRunner* automatic, bool auto_native, bool shared_clock,
                           const Engine& engine, int ranks_per_host) noexcept {
  if (!trace_) return;
  done_ = true;
  CallRecord r;
  r.exit_ns = now_ns();
  r.entry_ns = entry_ns_;
  r.config = trace_->config_of(count_, dtype_, op_, options_, engine, ranks_per_host);
  r.algorithm = static_cast<std::int16_t>(ran.algorithm);
  r.straggler = static_cast<std::int16_t>(ran.straggler);
  r.late_count = static_cast<std::uint8_t>(std::min<std::size_t>(ran.late.size(), 255));
  for (std::size_t i = 0; i < ran.late.size() && i < CallRecord::kMaxLate; ++i)
    r.late[i] = static_cast<std::int16_t>(ran.late[i]);
  r.shared_clock = shared_clock;
  if (auto_native) {
    r.reason = TraceReason::auto_small;
  } else if (automatic) {
    const StragglerPolicy& p = automatic->policy();
    r.reason = p.calls_begun() == 1 ? TraceReason::auto_first
               : ran == p.incumbent() ? TraceReason::auto_decided
                                      : TraceReason::auto_explore;
    r.auto_late_rank = static_cast<std::int16_t>(p.late_rank());
    r.auto_delay_s = p.delay_s();
    r.auto_decisions = p.decisions();
  }
  if (count_ == 0) r.reason = TraceReason::empty;
  trace_->record(r);
}

CallTrace::Call::~Call() {
  if (!trace_ || done_) return;
  CallRecord r;
  r.entry_ns = entry_ns_;
  r.exit_ns = now_ns();
  r.reason = count_ == 0 ? TraceReason::empty : TraceReason::failed;
  trace_->record(r);
}

void CallTrace::record(const CallRecord& r) noexcept {
  if (closed_.load(std::memory_order_relaxed)) return;
  if (used_ == kCapacity) hand_to_writer();
  records_[used_] = r;
  records_[used_].call = calls_++;
  shared_clock_ = shared_clock_ || r.shared_clock;
  ++used_;
}

void CallTrace::hand_to_writer() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [this] { return pending_ == nullptr; });  // the previous buffer written
  pending_ = records_;
  pending_used_ = used_;
  records_ = records_ == buffers_[0].get() ? buffers_[1].get() : buffers_[0].get();
  used_ = 0;
  if (!writer_.joinable()) {
    try {
      writer_ = std::thread([this] { writer_loop(); });
    } catch (const std::system_error&) {  // no thread to be had: write it here, this once
      const CallRecord* records = pending_;
      lock.unlock();
      write(records, pending_used_);
      lock.lock();
      pending_ = nullptr;
      return;
    }
  }
  wake_.notify_all();
}

void CallTrace::writer_loop() noexcept {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return pending_ != nullptr || stop_; });
    if (!pending_) return;
    const CallRecord* records = pending_;
    const std::size_t n = pending_used_;
    lock.unlock();
    write(records, n);
    lock.lock();
    pending_ = nullptr;
    wake_.notify_all();
  }
}

void CallTrace::write(const CallRecord* records, std::size_t n) noexcept {
  try {
    if (!header_written_) {
      header_written_ = true;
      std::fprintf(jsonl_,
                   "{\"type\":\"header\",\"format\":\"stragglar-trace\",\"version\":1,\"api\":%s,\"rank\":%d,"
                   "\"nranks\":%d,\"comm\":%d,\"pid\":%ld,\"host_id\":%lld,\"clock_id\":%lld,"
                   "\"clock\":\"steady_clock (CLOCK_MONOTONIC) ns: comparable across ranks with equal clock_id\"}\n",
                   quoted(api_).c_str(), rank_, nranks_, comm_, static_cast<long>(getpid()),
                   static_cast<long long>(host_id_), static_cast<long long>(clock_id_));
      std::fprintf(chrome_,
                   "[\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
                   "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n"
                   "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}",
                   rank_, rank_, rank_, rank_, rank_, comm_,
                   quoted("communicator " + std::to_string(comm_) + " (" + api_ + ")").c_str());
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);  // a call may be adding one
      for (; configs_written_ < configs_.size(); ++configs_written_) {
        const std::size_t i = configs_written_;
        const Config& c = configs_[i];
        std::fprintf(jsonl_,
                     "{\"type\":\"config\",\"config\":%zu,\"count\":%zu,\"bytes\":%zu,\"dtype\":\"%s\",\"op\":\"%s\","
                     "\"algorithm\":\"%s\",\"straggler\":%d,\"pipeline\":%d,\"model\":{\"stragglar_at_zero_s\":",
                     i, c.count, c.count * size_of(static_cast<DataType>(c.dtype)),
                     to_string(static_cast<DataType>(c.dtype)), to_string(static_cast<ReduceOp>(c.op)),
                     to_string(static_cast<Algorithm>(c.algorithm)), c.straggler, c.pipeline);
        number(jsonl_, c.stragglar_at_zero);
        std::fputs(",\"stragglar_at_infinity_s\":", jsonl_);
        number(jsonl_, c.stragglar_at_infinity);
        std::fputs(",\"bulk_s\":", jsonl_);
        number(jsonl_, c.bulk);
        std::fprintf(jsonl_,
                     ",\"alpha_s\":%.9g,\"beta_s_per_byte\":%.9g,\"gamma_s_per_byte\":%.9g,\"ranks_per_host\":%d}}\n",
                     c.cost.alpha_s, c.cost.beta_s_per_byte, c.cost.gamma_s_per_byte, c.cost.ranks_per_host);
      }
    }
    // Both files' text for a batch of records, then one write each: the writer spends ~0.3 µs
    // a record where fprintf spent ~1 µs.
    Text jsonl, chrome;
    for (std::size_t i = 0; i < n; ++i) {
      const CallRecord& r = records[i];
      const char* alg = r.algorithm >= 0 ? to_string(static_cast<Algorithm>(r.algorithm)) : "none";
      const char* reason = to_string(r.reason);
      jsonl.add("{\"type\":\"call\",\"call\":").add(r.call).add(",\"config\":").add(r.config);
      jsonl.add(",\"entry_ns\":").add(r.entry_ns).add(",\"exit_ns\":").add(r.exit_ns);
      jsonl.add(",\"algorithm\":\"").add(alg).add("\",\"straggler\":").add(r.straggler).add(",\"late_set\":");
      jsonl.late_set(r).add(",\"reason\":\"").add(reason).add("\",\"shared_clock\":");
      jsonl.add(r.shared_clock ? "true" : "false");
      if (r.reason == TraceReason::auto_first || r.reason == TraceReason::auto_decided ||
          r.reason == TraceReason::auto_explore) {
        jsonl.add(",\"auto_late_rank\":").add(r.auto_late_rank).add(",\"auto_delay_s\":").add_number(r.auto_delay_s);
        jsonl.add(",\"auto_decisions\":").add(r.auto_decisions);
      }
      jsonl.add("}\n");
      // Chrome: a complete event ("X") per call, times in µs (exact: ns / 1000) on the same clock.
      chrome.add(",\n{\"ph\":\"X\",\"cat\":\"allreduce\",\"name\":\"").name(r, alg).add("\",\"pid\":").add(rank_);
      chrome.add(",\"tid\":").add(comm_).add(",\"ts\":").add_us(r.entry_ns).add(",\"dur\":").add_us(r.exit_ns - r.entry_ns);
      chrome.add(",\"args\":{\"call\":").add(r.call).add(",\"config\":").add(r.config).add(",\"algorithm\":\"");
      chrome.add(alg).add("\",\"straggler\":").add(r.straggler).add(",\"late_set\":").late_set(r);
      chrome.add(",\"reason\":\"").add(reason).add("\"}}");
      if (jsonl.size() > (std::size_t{1} << 20) || i + 1 == n) {
        jsonl.write_to(jsonl_);
        chrome.write_to(chrome_);
      }
    }
    std::fflush(jsonl_);
    std::fflush(chrome_);
  } catch (...) {
    // Out of memory while formatting: these records are lost, the job goes on.
  }
}

void CallTrace::close() noexcept {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closed_.load(std::memory_order_relaxed)) return;
    closed_.store(true, std::memory_order_relaxed);
    wake_.wait(lock, [this] { return pending_ == nullptr; });
    stop_ = true;
    wake_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
  write(records_, used_);
  used_ = 0;
  std::fprintf(jsonl_, "{\"type\":\"end\",\"calls\":%lld,\"shared_clock\":%s}\n", static_cast<long long>(calls_),
               shared_clock_ ? "true" : "false");
  std::fputs("\n]\n", chrome_);
  std::fclose(jsonl_);
  std::fclose(chrome_);
}

}  // namespace stragglar::detail

namespace stragglar {

void set_trace_path(std::string_view path) {
  detail::Registry& reg = detail::registry();
  const std::lock_guard<std::mutex> lock(reg.mutex);
  reg.path_set = true;
  reg.path = std::string(path);
}

}  // namespace stragglar
