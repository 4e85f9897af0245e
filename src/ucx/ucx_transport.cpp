// UcxTransport: UCX tag send/receive per message, one wait per round (see ucx_transport.hpp).
#include "ucx/ucx_transport.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>
#include <ucp/api/ucp.h>
#include <ucs/debug/log_def.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <mutex>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "stragglar/error.hpp"

namespace stragglar {
namespace {

using Clock = std::chrono::steady_clock;

constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
// The tag of "this rank gave up" notices: above every tag a configuration or the agreement uses
// (those are ints below 2^31).
constexpr int kGaveUpTag = -1;  // 0xffffffff in the tag's upper half
// Polls of ucp_worker_progress before a waiting rank gives its core away: a round whose
// peer is already there completes within them without a system call.
constexpr auto kSpin = std::chrono::microseconds(20);
// How often a waiting rank checks that the peers it waits for on this host still live.
constexpr auto kWatchPeriod = std::chrono::milliseconds(100);
// After a timeout or an error, how long cancelled receives may take to complete.
constexpr auto kCancelGrace = std::chrono::seconds(1);
// How long the destructor lets endpoint closes (flushes) run.
constexpr auto kCloseGrace = std::chrono::seconds(2);

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

std::string ucs_text(ucs_status_t s) { return ucs_status_string(s); }

[[noreturn]] void throw_ucx(const char* what, ucs_status_t s) {
  throw Error(ErrorCode::SystemError, std::string("UcxTransport: ") + what + " failed: " + ucs_text(s));
}

// ---- a peer on this host that exits in the middle of a single-copy (CMA) transfer --------------
// UCX 1.13 reaches a peer on this host through shared memory plus CMA (process_vm_readv/writev)
// for large messages. When that peer has exited, the CMA call fails (ESRCH); on an endpoint
// without UCX error handling (ours within a host, see ucx_transport.hpp) UCP fails the endpoint,
// completes its requests with an error, and then logs the failure at FATAL level, whose default
// handler aborts the process (a survivor must raise, not abort). This handler,
// ahead of UCX's own, prints that one message as an error and stops it there, so the failed
// requests reach exchange(), which throws Error(RemoteError) like any dead peer. Every other
// message goes on to UCX's handlers. Measured against the alternatives (UCX_TLS=^cma, error
// handling over TCP, no rendezvous) in docs/reliability.md.
std::atomic<long> g_cma_failures{0};
// The same, counted in the thread whose progress hit it (UCX runs single-copy transfers in the
// caller's ucp_worker_progress): exchange() compares it before and after a round.
thread_local long t_cma_failures = 0;

// UCX state that could not be torn down safely (see Impl::shutdown), kept reachable until the
// process exits rather than lost.
struct LeftToExit {
  ucp_context_h context;
  ucp_worker_h worker;
  ucp_address_t* address;
};
std::vector<LeftToExit>& left_to_process_exit() {
  static auto* kept = new std::vector<LeftToExit>();  // never destroyed: outlives every transport
  return *kept;
}

ucs_log_func_rc_t on_ucx_log(const char* file, unsigned line, const char*, ucs_log_level_t level,
                             const ucs_log_component_config_t*, const char* format, va_list ap) {
  if (level != UCS_LOG_LEVEL_FATAL) return UCS_LOG_FUNC_RC_CONTINUE;
  const std::string_view f(file != nullptr ? file : "");
  const bool single_copy = f.ends_with("cma_ep.c") || f.ends_with("scopy_ep.c");
  if (!single_copy) return UCS_LOG_FUNC_RC_CONTINUE;
  g_cma_failures.fetch_add(1, std::memory_order_relaxed);
  ++t_cma_failures;
  char text[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(text, sizeof text, format, copy);
  va_end(copy);
  std::fprintf(stderr,
               "[stragglar] pid %d: UCX %s:%u: %s (the peer exited: an error for the call that waits for it, not an "
               "abort)\n",
               static_cast<int>(::getpid()), file, line, text);
  return UCS_LOG_FUNC_RC_STOP;
}

void install_ucx_log_handler() {
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(on_ucx_log); });
}

// ---- who a rank is: enough to tell whether it shares our host and whether it still lives --
struct Identity {
  std::uint32_t pid = 0;
  std::uint64_t start_time = 0;  // /proc/<pid>/stat field 22: tells a reused pid apart
  std::string hostname;
  std::string boot_id;           // two hosts may share a hostname, never a boot id
  std::string pid_namespace;     // pids mean the same only inside one pid namespace
};

// The whole of a small file (of /proc), or false. POSIX read, not std::ifstream: libstdc++'s
// filebuf throws std::ios_base::failure from underflow when read() fails, whatever the stream's
// exception mask, and reading /proc/<pid>/stat of a process that exits meanwhile fails with
// ESRCH (faults_recover: a survivor aborted with "basic_filebuf::underflow error reading the
// file: No such process" while watching a peer that had just exited).
bool read_small_file(const char* path, std::string& out) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  out.clear();
  char buf[1024];
  bool ok = true;
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got > 0) {
      out.append(buf, static_cast<std::size_t>(got));
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      ok = false;
      break;
    }
  }
  ::close(fd);
  return ok;
}

std::string read_first_line(const char* path) {
  std::string text;
  if (!read_small_file(path, text)) return {};
  return text.substr(0, text.find('\n'));
}

// Fields of /proc/<pid>/stat after the command name (which may contain spaces and ')').
// Returns false when the process does not exist (or stops existing while it is read).
bool read_proc_stat(std::uint32_t pid, char& state, std::uint64_t& start_time) {
  std::string text;
  if (!read_small_file(("/proc/" + std::to_string(pid) + "/stat").c_str(), text)) return false;
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  std::istringstream rest(text.substr(close + 2));
  std::string field;
  rest >> state;
  // state is field 3; starttime is field 22.
  for (int i = 4; i < 22; ++i) rest >> field;
  rest >> start_time;
  return static_cast<bool>(rest);
}

Identity self_identity() {
  Identity id;
  id.pid = static_cast<std::uint32_t>(::getpid());
  char state = 0;
  read_proc_stat(id.pid, state, id.start_time);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  id.hostname = host;
  id.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (n > 0) id.pid_namespace.assign(ns, static_cast<std::size_t>(n));
  return id;
}

// Alive: exists, is not a zombie, and is the same process (start time) as at connect.
bool process_alive(std::uint32_t pid, std::uint64_t start_time) {
  char state = 0;
  std::uint64_t t = 0;
  if (!read_proc_stat(pid, state, t)) return false;
  return state != 'Z' && state != 'X' && t == start_time;
}

// ---- the record a rank publishes in the store ---------------------------------------------
constexpr char kMagic[8] = {'s', 't', 'g', 'u', 'c', 'x', '0', '1'};

struct Record {
  std::uint32_t rank = 0, nranks = 0;
  Identity id;
  std::vector<std::uint8_t> address;
};

class Writer {
 public:
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  }
  void u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  std::vector<std::uint8_t> out;
};

class Reader {
 public:
  Reader(const std::vector<std::uint8_t>& in, std::string what) : in_(in), what_(std::move(what)) {}
  void bytes(void* p, std::size_t n) {
    need(n);
    std::memcpy(p, in_.data() + pos_, n);
    pos_ += n;
  }
  std::uint64_t u64() {
    need(8);
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{in_[pos_ + static_cast<std::size_t>(i)]} << (8 * i);
    pos_ += 8;
    return v;
  }
  std::string str() {
    const std::uint64_t n = u64();
    need(n);
    std::string s(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  void need(std::uint64_t n) {
    if (n > in_.size() - pos_)
      throw Error(ErrorCode::Mismatch, what_ + " is truncated (" + std::to_string(in_.size()) + " bytes)");
  }
  const std::vector<std::uint8_t>& in_;
  std::string what_;
  std::size_t pos_ = 0;
};

std::vector<std::uint8_t> encode(const Record& r) {
  Writer w;
  w.bytes(kMagic, sizeof kMagic);
  w.u64(r.rank);
  w.u64(r.nranks);
  w.u64(r.id.pid);
  w.u64(r.id.start_time);
  w.str(r.id.hostname);
  w.str(r.id.boot_id);
  w.str(r.id.pid_namespace);
  w.u64(r.address.size());
  w.bytes(r.address.data(), r.address.size());
  return std::move(w.out);
}

Record decode(const std::vector<std::uint8_t>& in, const std::string& key) {
  const std::string what = "UcxTransport: store key '" + key + "'";
  Reader rd(in, what);
  char magic[sizeof kMagic];
  rd.bytes(magic, sizeof magic);
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0)
    throw Error(ErrorCode::Mismatch, what + " holds no stragglar UCX address (another program's key, or another "
                                            "stragglar version); expected a record starting with 'stgucx01'");
  Record r;
  r.rank = static_cast<std::uint32_t>(rd.u64());
  r.nranks = static_cast<std::uint32_t>(rd.u64());
  r.id.pid = static_cast<std::uint32_t>(rd.u64());
  r.id.start_time = rd.u64();
  r.id.hostname = rd.str();
  r.id.boot_id = rd.str();
  r.id.pid_namespace = rd.str();
  const std::uint64_t length = rd.u64();
  if (length > in.size()) throw Error(ErrorCode::Mismatch, what + " is truncated (" + std::to_string(in.size()) + " bytes)");
  r.address.resize(length);
  rd.bytes(r.address.data(), r.address.size());
  return r;
}

// Backoff of MpiTransport: yield for the first millisecond, then sleep 20 µs between polls.
class Backoff {
 public:
  explicit Backoff(Clock::time_point since) : since_(since) {}
  void pause() {
    if (Clock::now() - since_ < std::chrono::milliseconds(1)) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  Clock::time_point since_;
};


}  // namespace

UcxOptions UcxOptions::from_env(double timeout_s) {
  UcxOptions o;
  require(timeout_s > 0, "UcxTransport: timeout of " + seconds_text(timeout_s) + " s, expected > 0");
  o.timeout_s = timeout_s;
  // Read at each connect, through the runtime's one reader of STRAGGLAR_* (runtime/env.hpp).
  const detail::RuntimeConfig c = detail::read_runtime_config_of({"STRAGGLAR_UCX_WAIT", "STRAGGLAR_UCX_ERROR_MODE"});
  o.wait = c.ucx_wait;
  o.error_mode = c.ucx_error_mode;
  return o;
}

std::string UcxOptions::describe() const {
  const char* w = wait == Wait::poll_fd ? "poll" : wait == Wait::backoff ? "backoff" : "yield_poll";
  const char* m = error_mode == ErrorMode::per_host ? "per_host" : error_mode == ErrorMode::peer ? "peer" : "none";
  return std::string("wait ") + w + ", errors " + m;
}

// ---- the implementation ---------------------------------------------------------------------
struct UcxTransport::Impl {
  struct Peer {
    Impl* owner = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    bool error_handling = false;  // endpoint created with UCP_ERR_HANDLING_MODE_PEER
    bool watch_process = false;   // same host and pid namespace: watch /proc/<pid>
    std::uint32_t pid = 0;
    std::uint64_t start_time = 0;
    std::string host;
    ucs_status_t failure = UCS_OK;  // set by UCX's error handler
  };
  struct Pending {
    void* request = nullptr;  // null once completed (or completed at posting)
    int peer = 0;
    bool is_send = false;
    std::size_t bytes = 0;
    // Receives: set by on_received (UCX calls it even for a message that had arrived).
    bool received = false;
    ucs_status_t status = UCS_INPROGRESS;
    std::size_t length = 0;
  };

  int rank = 0, nranks = 0;
  UcxOptions options;
  int tag = 1;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  ucp_address_t* address = nullptr;
  std::size_t address_length = 0;
  int event_fd = -1;
  std::vector<Peer> peers;       // sized once in connect(): the error handler holds &peers[r]
  std::vector<Pending> pending;  // reused: no allocation per round once warmed up
  std::size_t outstanding = 0;
  bool broken = false;           // an exchange failed: the transport is unusable
  std::string broken_reason;
  bool uncancelled_receive = false;  // a receive UCX could not cancel: never progress again
  long cma_failures_at_start = 0;    // g_cma_failures when this worker was made

  ~Impl() { shutdown(); }

  static void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
    auto* peer = static_cast<Peer*>(arg);
    if (peer->failure == UCS_OK) peer->failure = status;
  }

  static void on_received(void*, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
    auto* p = static_cast<Pending*>(user_data);
    p->status = status;
    p->length = info != nullptr ? info->length : 0;
    p->received = true;
  }

  static ucp_tag_t make_tag(int user_tag, int source) {
    return (ucp_tag_t{static_cast<std::uint32_t>(user_tag)} << 32) | static_cast<std::uint32_t>(source);
  }

  void init_ucx() {
    cma_failures_at_start = g_cma_failures.load(std::memory_order_relaxed);
    install_ucx_log_handler();
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) throw_ucx("ucp_config_read (check the UCX_* environment variables)", s);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_TAG | (uses_event_fd() ? UCP_FEATURE_WAKEUP : 0);
    params.estimated_num_eps = static_cast<std::size_t>(nranks);
    s = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (s != UCS_OK) throw_ucx("ucp_init", s);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    // One thread at a time, not necessarily the one that connected (a torch backend may
    // run collectives on a thread of its own).
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    s = ucp_worker_create(context, &wp, &worker);
    if (s != UCS_OK) throw_ucx("ucp_worker_create", s);
    s = ucp_worker_get_address(worker, &address, &address_length);
    if (s != UCS_OK) throw_ucx("ucp_worker_get_address", s);
    if (uses_event_fd()) {
      s = ucp_worker_get_efd(worker, &event_fd);
      if (s != UCS_OK) throw_ucx("ucp_worker_get_efd", s);
    }
  }

  bool uses_event_fd() const { return options.wait != UcxOptions::Wait::backoff; }

  void connect_peer(int r, const Record& rec, const Identity& me) {
    Peer& p = peers[static_cast<std::size_t>(r)];
    p.owner = this;
    p.rank = r;
    p.pid = rec.id.pid;
    p.start_time = rec.id.start_time;
    p.host = rec.id.hostname;
    const bool same_host = rec.id.hostname == me.hostname && rec.id.boot_id == me.boot_id;
    switch (options.error_mode) {
      case UcxOptions::ErrorMode::per_host: p.error_handling = !same_host; break;
      case UcxOptions::ErrorMode::peer: p.error_handling = true; break;
      case UcxOptions::ErrorMode::none: p.error_handling = false; break;
    }
    p.watch_process = r != rank && same_host && rec.id.pid_namespace == me.pid_namespace && p.start_time != 0;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.address = reinterpret_cast<const ucp_address_t*>(rec.address.data());
    ep.err_mode = p.error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    if (p.error_handling) {
      ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
      ep.err_handler.cb = &Impl::on_endpoint_error;
      ep.err_handler.arg = &p;
    }
    const ucs_status_t s = ucp_ep_create(worker, &ep, &p.ep);
    if (s != UCS_OK)
      throw Error(ErrorCode::SystemError, "UcxTransport: rank " + std::to_string(rank) +
                                              ": ucp_ep_create to rank " + std::to_string(r) + " (host " +
                                              rec.id.hostname + ") failed: " + ucs_text(s));
  }

  std::string who() const { return "rank " + std::to_string(rank); }

  // ---- one round --------------------------------------------------------------------------
  void exchange(std::span<const Message> sends, std::span<const Message> recvs) {
    if (broken)
      throw Error(ErrorCode::RemoteError, "UcxTransport is unusable after an earlier error — " + broken_reason);
    pending.clear();
    outstanding = 0;
    // Entries must not move once posted: UCX's receive callback writes into them.
    if (pending.capacity() < sends.size() + recvs.size()) pending.reserve(sends.size() + recvs.size());
    const long cma_failures_before = t_cma_failures;
    // Receives first, so a peer's eager send finds its buffer posted.
    for (const Message& m : recvs)
      if (m.bytes > 0) post_receive(m);
    for (const Message& m : sends)
      if (m.bytes > 0) post_send(m);
    wait();
    // A single-copy read from a peer that exited fails, but UCX 1.13, past the FATAL message
    // on_ucx_log stopped, can still complete that receive as a success with its bytes never
    // copied (faults_recover: 5 of 60 runs of one kill trial returned a wrong sum). Such a
    // round is never a success.
    if (t_cma_failures != cma_failures_before)
      fail(ErrorCode::RemoteError, "UcxTransport (" + who() +
                                       "): a peer on this host exited during a single-copy (CMA) transfer of this "
                                       "call: its data is incomplete");
    check_senders_kept_their_data(recvs);
  }

  // A peer that gave up on this call returns to its caller with its sends still posted: a
  // rendezvous receive here may read that peer's buffer (a single-copy read, or the fragments
  // it has yet to send) after its caller has reused it, and complete as a success with someone
  // else's numbers (faults_recover: a survivor returned a wrong sum in 5 of 60 runs of one kill
  // trial, after another survivor timed out and refilled its buffer). The peer sends its
  // "gave up" notice before it returns; on this host its messages travel in order through
  // shared memory, so once our receive has seen the reused buffer, the notice is here too.
  void check_senders_kept_their_data(std::span<const Message> recvs) {
    if (recvs.empty()) return;
    for (int i = 0; i < 64 && ucp_worker_progress(worker) != 0; ++i) {
    }
    for (const Message& m : recvs) {
      if (m.bytes == 0 || m.peer == rank) continue;
      ucp_tag_recv_info_t info{};
      if (ucp_tag_probe_nb(worker, make_tag(kGaveUpTag, m.peer), kFullMask, 0, &info) != nullptr)
        fail(ErrorCode::RemoteError, "UcxTransport (" + who() + "): rank " + std::to_string(m.peer) +
                                         " gave up on this call while this rank received from it: what it sent "
                                         "cannot be trusted (its own error says why it gave up)");
    }
  }

  void check_peer(int peer) {
    if (peer < 0 || peer >= nranks)
      fail(ErrorCode::Internal, "UcxTransport (" + who() + "): peer " + std::to_string(peer) + " outside [0, " +
                                    std::to_string(nranks) + ")");
    const Peer& p = peers[static_cast<std::size_t>(peer)];
    if (p.failure != UCS_OK) fail(ErrorCode::RemoteError, endpoint_failure_text(p));
  }

  void post_receive(const Message& m) {
    check_peer(m.peer);
    Pending& p = pending.emplace_back();
    p.peer = m.peer;
    p.bytes = m.bytes;
    // A completion callback, always (no immediate completion): UCX 1.13 fills neither
    // recv_info nor the request's info when a receive completes at posting, and the length
    // is what catches a peer that sends fewer bytes than expected.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = &Impl::on_received;
    param.user_data = &p;
    const ucs_status_ptr_t r = ucp_tag_recv_nbx(worker, m.data, m.bytes, make_tag(tag, m.peer), kFullMask, &param);
    if (r == nullptr || UCS_PTR_IS_ERR(r))
      fail(ErrorCode::SystemError, "UcxTransport (" + who() + "): ucp_tag_recv_nbx from rank " +
                                       std::to_string(m.peer) + ": " +
                                       (r == nullptr ? std::string("no request") : ucs_text(UCS_PTR_STATUS(r))));
    p.request = r;
    ++outstanding;
  }

  void post_send(const Message& m) {
    check_peer(m.peer);
    Pending& p = pending.emplace_back();
    p.peer = m.peer;
    p.bytes = m.bytes;
    p.is_send = true;
    ucp_request_param_t param{};
    const ucs_status_ptr_t r =
        ucp_tag_send_nbx(peers[static_cast<std::size_t>(m.peer)].ep, m.data, m.bytes, make_tag(tag, rank), &param);
    if (UCS_PTR_IS_ERR(r)) {
      finished(p, UCS_PTR_STATUS(r));
    } else if (r != nullptr) {
      p.request = r;
      ++outstanding;
    }
  }

  // A request completed with `status`: throws for errors and for a message of another size.
  void finished(Pending& p, ucs_status_t status) {
    if (status == UCS_OK && (p.is_send || p.length == p.bytes)) return;  // no allocation on the hot path
    const std::string what = (p.is_send ? "send to rank " : "receive from rank ") + std::to_string(p.peer);
    if (status == UCS_ERR_MESSAGE_TRUNCATED)
      fail(ErrorCode::Mismatch, "UcxTransport (" + who() + "): " + what + ": the message is longer than the " +
                                    std::to_string(p.bytes) + " bytes expected (ranks disagree on the call)");
    if (status != UCS_OK) {
      const Peer& peer = peers[static_cast<std::size_t>(p.peer)];
      if (peer.failure != UCS_OK) fail(ErrorCode::RemoteError, endpoint_failure_text(peer));
      fail(status == UCS_ERR_CANCELED || status == UCS_ERR_ENDPOINT_TIMEOUT || status == UCS_ERR_CONNECTION_RESET ||
                   status == UCS_ERR_UNREACHABLE
               ? ErrorCode::RemoteError
               : ErrorCode::SystemError,
           "UcxTransport (" + who() + "): " + what + " failed: " + ucs_text(status));
    }
    if (!p.is_send && p.length != p.bytes)
      fail(ErrorCode::Mismatch, "UcxTransport (" + who() + "): " + what + ": got " + std::to_string(p.length) +
                                    " bytes, expected " + std::to_string(p.bytes) + " (ranks disagree on the call)");
  }

  // Collects completed requests; true when none is outstanding.
  bool collect() {
    for (Pending& p : pending) {
      if (p.request == nullptr) continue;
      const ucs_status_t s = p.is_send ? ucp_request_check_status(p.request) : p.status;
      if (p.is_send ? s == UCS_INPROGRESS : !p.received) continue;
      ucp_request_free(p.request);
      p.request = nullptr;
      --outstanding;
      finished(p, s);
    }
    return outstanding == 0;
  }

  void wait() {
    if (outstanding == 0) return;
    const Clock::time_point start = Clock::now();
    // Spin: the common case, the peer is already there.
    do {
      ucp_worker_progress(worker);
      if (collect()) return;
    } while (Clock::now() - start < kSpin);
    const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.timeout_s));
    auto next_watch = start + kWatchPeriod;
    Backoff backoff(Clock::now());
    for (;;) {
      while (ucp_worker_progress(worker) != 0) {
      }
      if (collect()) return;
      check_endpoint_failures();
      const Clock::time_point now = Clock::now();
      if (now >= next_watch) {
        check_processes();
        check_peers_in_other_calls();
        next_watch = now + kWatchPeriod;
      }
      if (now >= deadline) fail(ErrorCode::Timeout, timeout_text());
      if (options.wait == UcxOptions::Wait::backoff ||
          (options.wait == UcxOptions::Wait::yield_poll && now - start < std::chrono::milliseconds(1))) {
        backoff.pause();
        continue;
      }
      // Sleep in the kernel until UCX has something for us (or the next watch/deadline).
      const ucs_status_t s = ucp_worker_arm(worker);
      if (s == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress them first
      if (s != UCS_OK) fail(ErrorCode::SystemError, "UcxTransport (" + who() + "): ucp_worker_arm: " + ucs_text(s));
      const auto until = std::min(next_watch, deadline);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count() + 1;
      pollfd pfd{event_fd, POLLIN, 0};
      ::poll(&pfd, 1, static_cast<int>(std::clamp<long long>(ms, 1, 1000)));  // EINTR: loop again
    }
  }

  std::string endpoint_failure_text(const Peer& p) const {
    return "UcxTransport (" + who() + "): UCX reports the endpoint to rank " + std::to_string(p.rank) + " (host " +
           p.host + ") failed: " + ucs_text(p.failure) + " — that peer died or its host is unreachable";
  }

  void check_endpoint_failures() {
    for (const Pending& p : pending) {
      if (p.request == nullptr) continue;
      const Peer& peer = peers[static_cast<std::size_t>(p.peer)];
      if (peer.failure != UCS_OK) fail(ErrorCode::RemoteError, endpoint_failure_text(peer));
    }
  }

  // A peer we wait for whose message with another tag (another configuration, or the
  // agreement) waits unmatched here is in another call: it called with a count, dtype, op or
  // option that differs from ours on a configuration one of us knew already, where no agreement
  // runs (else it would end in a timeout). UCX delivers one peer's messages in the order they
  // were sent, so had it been in this call, its message for our posted receive would have come
  // first and matched. Error(Mismatch) within the watch period instead of a timeout.
  void check_peers_in_other_calls() {
    constexpr ucp_tag_t kSourceMask = 0xffffffffull;
    for (const Pending& p : pending) {
      if (p.request == nullptr || p.is_send) continue;
      ucp_tag_recv_info_t info{};
      if (ucp_tag_probe_nb(worker, make_tag(kGaveUpTag, p.peer), kFullMask, 0, &info) != nullptr)
        fail(ErrorCode::RemoteError, "UcxTransport (" + who() + "): rank " + std::to_string(p.peer) +
                                         " gave up on this call (it timed out, lost a peer or was called "
                                         "with different arguments; its own error says which)");
      // Only on this host (this process included), where one lane carries all of a peer's
      // messages in order; across hosts UCX may spread them over several lanes.
      if (p.peer != rank && !peers[static_cast<std::size_t>(p.peer)].watch_process) continue;
      if (ucp_tag_probe_nb(worker, make_tag(0, p.peer), kSourceMask, 0, &info) == nullptr) continue;
      const int other = static_cast<int>(info.sender_tag >> 32);
      if (other == tag) continue;  // a later round of this call: the peer is ahead, not elsewhere
      fail(ErrorCode::Mismatch, "UcxTransport (" + who() + "): rank " + std::to_string(p.peer) +
                                    " is in another call (its message has tag " + std::to_string(other) +
                                    ", this call's is " + std::to_string(tag) +
                                    "): the ranks called with different arguments (count, dtype, op or options)");
    }
  }

  void check_processes() {
    for (const Pending& p : pending) {
      if (p.request == nullptr) continue;
      const Peer& peer = peers[static_cast<std::size_t>(p.peer)];
      if (peer.watch_process && !process_alive(peer.pid, peer.start_time))
        fail(ErrorCode::RemoteError, "UcxTransport (" + who() + "): rank " + std::to_string(peer.rank) + " (pid " +
                                         std::to_string(peer.pid) + " on this host) exited while " + who() +
                                         " waited for it");
    }
  }

  std::string timeout_text() const {
    std::string waiting;
    for (const Pending& p : pending) {
      if (p.request == nullptr) continue;
      const std::string item = (p.is_send ? "send to rank " : "receive from rank ") + std::to_string(p.peer);
      if (waiting.find(item) != std::string::npos) continue;  // several pieces to one peer
      if (!waiting.empty()) waiting += ", ";
      waiting += item;
    }
    return who() + " waited " + seconds_text(options.timeout_s) + " s (" + options.timeout_source + ") for: " + waiting +
           " — that peer is later than the timeout, stopped, died, or called with different arguments";
  }

  // Marks the transport unusable, cancels and completes the pending receives, then throws.
  [[noreturn]] void fail(ErrorCode code, const std::string& message) {
    broken = true;
    broken_reason = message;
    abandon_receives();
    tell_peers_we_gave_up();
    throw Error(code, message);
  }

  // A rank that gives up on a call tells every peer with one empty message on kGaveUpTag
  // (fire and forget): a peer waiting for it then raises within the watch period instead of
  // waiting out its own timeout, and a peer that comes late raises at once (else errors
  // cascade one timeout per hop). The message is empty: nothing to keep alive.
  void tell_peers_we_gave_up() {
    for (const Peer& peer : peers) {
      if (peer.rank == rank || peer.ep == nullptr || peer.failure != UCS_OK) continue;
      ucp_request_param_t param{};
      const ucs_status_ptr_t r = ucp_tag_send_nbx(peer.ep, nullptr, 0, make_tag(kGaveUpTag, rank), &param);
      if (r != nullptr && !UCS_PTR_IS_ERR(r)) ucp_request_free(r);  // UCX completes it on its own
    }
  }

  // A receive must never write into the caller's memory after exchange() has thrown. A
  // receive UCX has not matched yet is cancelled at once; one already matched (its data is
  // arriving) completes or fails within the grace period. One that does neither is left to
  // UCX and this transport never progresses UCX again (see shutdown()). Sends: see the
  // header (they only read the caller's memory).
  void abandon_receives() {
    for (Pending& p : pending)
      if (p.request != nullptr && !p.is_send) ucp_request_cancel(worker, p.request);
    const auto until = Clock::now() + kCancelGrace;
    for (;;) {
      bool left = false;
      for (Pending& p : pending) {
        if (p.request == nullptr || p.is_send) continue;
        if (!p.received) {
          left = true;
          continue;
        }
        ucp_request_free(p.request);
        p.request = nullptr;
      }
      if (!left) return;
      if (Clock::now() >= until) break;
      ucp_worker_progress(worker);
    }
    uncancelled_receive = true;
  }

  void shutdown() {
    if (worker == nullptr) {
      if (context != nullptr) ucp_cleanup(context);
      return;
    }
    if (uncancelled_receive) {
      // Progressing UCX (closing endpoints, destroying the worker) could complete a receive
      // whose peer resumed, into memory the caller may have freed: leave UCX's state to the
      // process exit instead.
      left_to_process_exit().push_back({context, worker, address});
      worker = nullptr;
      context = nullptr;
      address = nullptr;
      return;
    }
    // Sends still held (after an error): UCX finishes or cancels them as endpoints close.
    for (Pending& p : pending)
      if (p.request != nullptr) ucp_request_free(p.request);
    pending.clear();
    struct Closing {
      void* request;
      bool can_leave_work;  // a flush close on an endpoint without UCX error handling
    };
    std::vector<Closing> closing;
    // A flush that failed, or a close that did not finish: UCX may still hold work for that peer.
    bool unclean = false;
    for (Peer& p : peers) {
      if (p.ep == nullptr) continue;
      ucp_request_param_t param{};
      // A failed endpoint must be closed by force; a healthy one flushes what it still sends
      // (e.g. the last acknowledgement of a rendezvous a peer waits for). A peer on this host
      // whose process is gone counts as failed: UCX 1.13 cannot flush to it (the flush ends in
      // "Endpoint timeout" with work left queued on its CMA lane, and ucp_worker_destroy then
      // aborts on an assertion in uct_cma_ep_t_delete; found by faults_recover).
      const bool forced =
          p.failure != UCS_OK || (p.watch_process && p.rank != rank && !process_alive(p.pid, p.start_time));
      if (forced) {
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      }
      const ucs_status_ptr_t r = ucp_ep_close_nbx(p.ep, &param);
      p.ep = nullptr;
      // Only endpoints without UCX error handling (shared memory and CMA within a host) can
      // leave work that trips the assertion; with it (PEER mode, TCP) UCX cleans up after a
      // failed flush itself. A forced close reports the endpoint's failure: nothing is left.
      const bool can_leave_work = !forced && !p.error_handling;
      if (UCS_PTR_IS_ERR(r))
        unclean = unclean || can_leave_work;
      else if (r != nullptr)
        closing.push_back({r, can_leave_work});
    }
    const auto until = Clock::now() + kCloseGrace;
    while (!closing.empty() && Clock::now() < until) {
      ucp_worker_progress(worker);
      std::erase_if(closing, [&unclean](const Closing& c) {
        const ucs_status_t status = ucp_request_check_status(c.request);
        if (status == UCS_INPROGRESS) return false;
        unclean = unclean || (status != UCS_OK && c.can_leave_work);
        ucp_request_free(c.request);
        return true;
      });
      if (!closing.empty()) sched_yield();
    }
    for (const Closing& c : closing) unclean = unclean || c.can_leave_work;
    // A single-copy failure whose FATAL message on_ucx_log stopped: UCX's code past that message
    // never expected to run, and ucp_worker_destroy may then abort on an assertion in
    // uct_cma_ep_t_delete (found by faults_recover). Which worker it hit is not known: any made
    // before it counts.
    if (g_cma_failures.load(std::memory_order_relaxed) != cma_failures_at_start) unclean = true;
    for (const Closing& c : closing) ucp_request_free(c.request);  // UCX releases it with the worker
    if (unclean) {
      // Destroying the worker now could trip the same assertion: leave UCX's state to the
      // process exit (its shared memory is already marked for removal), held where leak
      // checkers see it is kept on purpose.
      left_to_process_exit().push_back({context, worker, address});
      worker = nullptr;
      context = nullptr;
      address = nullptr;
      return;
    }
    if (address != nullptr) ucp_worker_release_address(worker, address);
    ucp_worker_destroy(worker);
    worker = nullptr;
    ucp_cleanup(context);
    context = nullptr;
  }
};

// ---- UcxTransport ------------------------------------------------------------------------------
UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UcxTransport::~UcxTransport() = default;

std::unique_ptr<UcxTransport> UcxTransport::connect(KeyValueStore& store, std::string prefix, int rank, int nranks,
                                                    double timeout_s) {
  return connect(store, std::move(prefix), rank, nranks, UcxOptions::from_env(timeout_s));
}

std::unique_ptr<UcxTransport> UcxTransport::connect(KeyValueStore& store, std::string prefix, int rank, int nranks,
                                                    const UcxOptions& options) {
  require(nranks >= 1, "UcxTransport::connect: nranks " + std::to_string(nranks) + ", expected >= 1");
  require(rank >= 0 && rank < nranks, "UcxTransport::connect: rank " + std::to_string(rank) + " outside [0, " +
                                          std::to_string(nranks) + ")");
  require(options.timeout_s > 0,
          "UcxTransport::connect: timeout of " + seconds_text(options.timeout_s) + " s, expected > 0");
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->nranks = nranks;
  impl->options = options;
  impl->peers.resize(static_cast<std::size_t>(nranks));
  impl->init_ucx();

  const Identity me = self_identity();
  Record mine;
  mine.rank = static_cast<std::uint32_t>(rank);
  mine.nranks = static_cast<std::uint32_t>(nranks);
  mine.id = me;
  const auto* a = reinterpret_cast<const std::uint8_t*>(impl->address);
  mine.address.assign(a, a + impl->address_length);
  auto key_of = [&](int r) { return prefix + "/" + std::to_string(r); };
  store.set(key_of(rank), encode(mine));

  for (int r = 0; r < nranks; ++r) {
    const std::string key = key_of(r);
    const Record rec = r == rank ? mine : decode(store.get(key, options.timeout_s), key);
    if (rec.rank != static_cast<std::uint32_t>(r) || rec.nranks != static_cast<std::uint32_t>(nranks))
      throw Error(ErrorCode::Mismatch, "UcxTransport::connect: store key '" + key + "' was set by rank " +
                                           std::to_string(rec.rank) + " of " + std::to_string(rec.nranks) +
                                           ", expected rank " + std::to_string(r) + " of " + std::to_string(nranks) +
                                           " (a stale store, or ranks disagree on the world size)");
    if (rec.address.empty())
      throw Error(ErrorCode::Mismatch, "UcxTransport::connect: store key '" + key + "' has no UCX address");
    impl->connect_peer(r, rec, me);
  }
  return std::unique_ptr<UcxTransport>(new UcxTransport(std::move(impl)));
}

int UcxTransport::rank() const { return impl_->rank; }
int UcxTransport::nranks() const { return impl_->nranks; }
void UcxTransport::exchange(std::span<const Message> sends, std::span<const Message> recvs) {
  impl_->exchange(sends, recvs);
}
void UcxTransport::set_tag(int tag) { impl_->tag = tag; }
int UcxTransport::tag() const { return impl_->tag; }
void UcxTransport::set_timeout(double timeout_s) {
  if (!(timeout_s > 0))  // by Session::set_timeout, per call on the PyTorch backend: no string unless it fails
    throw Error(ErrorCode::InvalidUsage, "UcxTransport::set_timeout: " + seconds_text(timeout_s) + " s, expected > 0");
  impl_->options.timeout_s = timeout_s;
}

std::string UcxTransport::describe_peer(int peer) const {
  require(peer >= 0 && peer < impl_->nranks, "UcxTransport::describe_peer: peer " + std::to_string(peer) +
                                                 " outside [0, " + std::to_string(impl_->nranks) + ")");
  const Impl::Peer& p = impl_->peers[static_cast<std::size_t>(peer)];
  if (p.ep == nullptr) return "closed";
  char* text = nullptr;
  std::size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == nullptr) return "?";
  ucp_ep_print_info(p.ep, f);
  std::fclose(f);
  // Lines like "#   lane[0]:  3:sysv/memory.0 md[2] -> ...": keep "sysv/memory.0".
  std::istringstream lines(std::string(text, size));
  std::free(text);
  std::string line, out;
  while (std::getline(lines, line)) {
    const std::size_t lane = line.find("lane[");
    if (lane == std::string::npos) continue;
    std::istringstream words(line.substr(line.find(':', lane) + 1));
    std::string word;
    words >> word;
    word = word.substr(word.find(':') + 1);
    if (out.find(word) != std::string::npos) continue;
    if (!out.empty()) out += ' ';
    out += word;
  }
  out += p.error_handling ? " (UCX error handling)" : (p.watch_process ? " (process watched)" : "");
  return out;
}

}  // namespace stragglar
