// One rank of a fault-injection trial (the harness is run_faults.py beside it).
//
//   fault_worker ucx ARGS...   a rank started like torchrun (RANK, WORLD_SIZE, STRAGGLAR_STORE_DIR):
//                              the runtime core over UcxEngine, as the PyTorch backend's CPU tensors
//   fault_worker mpi ARGS...   a rank under mpirun: stragglar::allreduce on a dup of MPI_COMM_WORLD
//
//   ARGS: --algo NAME --count N --calls C --timeout S --out DIR
//         --fault none|kill|stop|delay|args|exit --victim R --fault-call K --fault-at F
//         [--others-late S]  in call K every rank but R enters S seconds late, and a kill or stop
//                         lands F x S after R entered: R dies or stops while it waits inside the
//                         call (auto on one host: holding its arrival ticket)
//         [--recover 1]   afterwards every live rank re-creates the communicator and runs one
//                         more call (restart; a killed UCX rank is relaunched by the harness with
//                         STRAGGLAR_FAULT_RELAUNCHED=1 and joins there)
//
// Every rank runs C in-place float32 sum all_reduces of N elements (one configuration, so calls
// after the first run on a known configuration). Rank R, in call K, injects the fault:
//   kill   SIGKILLs itself, F (in [0, 1]) of the way through the call (F x the duration of its
//          previous call, or of a few ms for the first);
//   stop   SIGSTOPs itself at the same kind of point (the harness sends SIGCONT later);
//   delay  sleeps 1.5 x the timeout before the call;
//   args   calls with count N + 1 (a different configuration than its peers);
//   exit   leaves before the call: tears down and exits 0.
// It writes one JSON object per line to DIR/rank<r>.jsonl, flushed at once (a hang still leaves
// what happened before it): per call its outcome (ok / error code + message), the seconds it
// took and the buffer's state ("reduced": exactly the sum; "untouched": the input; "mixed":
// anything else), then whether a call after an error failed at once, and "teardown" when the
// communicator is freed. The harness judges those lines and how each process ended.
//
// Inputs are small integers, so every partial sum is exact in float32 and "reduced" is a
// bit-exact comparison with the one possible result.
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "runtime/session.hpp"
#include "stragglar/algorithm.hpp"
#include "stragglar/error.hpp"
#include "stragglar/stragglar_mpi.h"
#include "ucx/kv_store.hpp"
#include "ucx/ucx_engine.hpp"
#include "ucx/ucx_transport.hpp"

using namespace stragglar;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string frontend, algo = "auto", fault = "none", out = ".";
  std::size_t count = 1024;
  int calls = 4, victim = -1, fault_call = 0;
  bool recover = false;
  double timeout_s = 3, fault_at = 0.5, others_late_s = 0;
};

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) throw Error(ErrorCode::InvalidUsage, "usage: fault_worker ucx|mpi --algo NAME --count N ...");
  a.frontend = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--algo") a.algo = v;
    else if (k == "--count") a.count = std::stoull(v);
    else if (k == "--calls") a.calls = std::stoi(v);
    else if (k == "--timeout") a.timeout_s = std::stod(v);
    else if (k == "--out") a.out = v;
    else if (k == "--fault") a.fault = v;
    else if (k == "--victim") a.victim = std::stoi(v);
    else if (k == "--fault-call") a.fault_call = std::stoi(v);
    else if (k == "--fault-at") a.fault_at = std::stod(v);
    else if (k == "--recover") a.recover = v == "1";
    else if (k == "--others-late") a.others_late_s = std::stod(v);
    else throw Error(ErrorCode::InvalidUsage, "fault_worker: unknown flag '" + k + "'");
  }
  return a;
}

float input_value(int rank, std::size_t i, int call) {
  return static_cast<float>(static_cast<int>((rank * 7 + i * 3 + static_cast<std::size_t>(call) * 5) % 17) - 8);
}

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The front-end's communicator: one in-place all_reduce, and its teardown.
class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual void allreduce(float* buf, std::size_t count, const Options& opts) = 0;
  virtual void teardown() = 0;
};

// As the PyTorch backend's CPU engine (src/torch/cpu_allreduce.cpp), with a second UCX session
// running Ring as the engine's native AllReduce (the backend's is Gloo).
class UcxComm final : public Comm {
 public:
  // `generation` > 0: a re-created communicator (restart), its own keys in the store;
  // `connect_s`: how long to wait for every rank's address (a restart waits for late ranks).
  UcxComm(double timeout_s, int generation, double connect_s) {
    rank_ = std::atoi(std::getenv("RANK"));
    n_ = std::atoi(std::getenv("WORLD_SIZE"));
    DirectoryStore store(std::getenv("STRAGGLAR_STORE_DIR"));
    UcxOptions o = UcxOptions::from_env(connect_s);
    const std::string gen = std::to_string(generation);
    native_engine_ = std::make_unique<detail::UcxEngine>(UcxTransport::connect(store, "native" + gen, rank_, n_, o),
                                                         [](void*, std::size_t, DataType, ReduceOp, bool) {
                                                           throw Error(ErrorCode::Internal, "the ring session has no native");
                                                         });
    native_ = std::make_unique<detail::Session>(*native_engine_, "native ring");
    native_->set_timeout(timeout_s);
    auto ring = [this](void* buf, std::size_t count, DataType dtype, ReduceOp op, bool /*keep: the ring session's own*/) {
      Options r;
      r.algorithm = Algorithm::ring;
      native_->allreduce(buf, buf, count, dtype, op, r);
    };
    // The ring session keeps its own buffers (it puts them back when it raises).
    engine_ = std::make_unique<detail::UcxEngine>(UcxTransport::connect(store, "main" + gen, rank_, n_, o), ring,
                                                  detail::Engine::BuffersOnError::native_stages);
    session_ = std::make_unique<detail::Session>(*engine_, "fault_worker");
    session_->set_timeout(timeout_s);
  }
  int rank() const override { return rank_; }
  int nranks() const override { return n_; }
  void allreduce(float* buf, std::size_t count, const Options& opts) override {
    session_->allreduce(buf, buf, count, DataType::float32, ReduceOp::sum, opts);
  }
  void teardown() override {
    session_.reset();
    engine_.reset();
    native_.reset();
    native_engine_.reset();
  }

 private:
  int rank_ = 0, n_ = 1;
  std::unique_ptr<detail::UcxEngine> native_engine_, engine_;
  std::unique_ptr<detail::Session> native_, session_;
};

ErrorCode code_of(stragglar_result r) {
  switch (r) {
    case stragglar_invalid_usage: return ErrorCode::InvalidUsage;
    case stragglar_mismatch: return ErrorCode::Mismatch;
    case stragglar_timeout: return ErrorCode::Timeout;
    case stragglar_remote_error: return ErrorCode::RemoteError;
    case stragglar_system_error: return ErrorCode::SystemError;
    default: return ErrorCode::Internal;
  }
}

// Through the C API (stragglar_mpi.h), as a C program calls it.
class MpiComm final : public Comm {
 public:
  MpiComm() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &n_);
  }
  int rank() const override { return rank_; }
  int nranks() const override { return n_; }
  void allreduce(float* buf, std::size_t count, const Options& opts) override {
    stragglar_options o;
    stragglar_options_init(&o);
    o.algorithm = static_cast<stragglar_algorithm>(opts.algorithm);
    const stragglar_result r = stragglar_mpi_allreduce(buf, buf, count, stragglar_float32, stragglar_sum, comm_, &o);
    if (r != stragglar_success) throw Error(code_of(r), stragglar_last_error());
  }
  void teardown() override {
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);  // frees stragglar's state (an attribute)
  }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, n_ = 1;
};

class Log {
 public:
  explicit Log(const std::string& path) : f_(path, std::ios::app) {}
  void write(const nlohmann::json& j) { f_ << j.dump() << '\n' << std::flush; }

 private:
  std::ofstream f_;
};

// kill / stop: a thread signals this process `after_s` from now. A call that ends sooner puts the
// fault between calls or into the next call: still a random point of the run (the harness records
// whether the victim did die or stop).
std::atomic<bool> g_fault_pending{false}, g_fault_done{false};
void signal_self_after(int sig, double after_s) {
  g_fault_pending = true;
  std::thread([sig, after_s] {
    std::this_thread::sleep_for(std::chrono::duration<double>(after_s));
    ::kill(::getpid(), sig);
    g_fault_done = true;  // a stopped process runs this once continued
  }).detach();
}

// --recover: the fault belongs to the first communicator's calls. A stop that lands after the
// last of them is over before the restart begins (else it would hit the re-created one, whose
// call the harness requires to succeed).
void wait_for_fault_to_pass() {
  while (g_fault_pending && !g_fault_done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

int run(const Args& a, Comm& comm, Log& log) {
  const int rank = comm.rank(), n = comm.nranks();
  const bool victim = rank == a.victim;
  Options opts;
  opts.algorithm = parse_algorithm(a.algo);
  std::vector<float> buf(a.count + 1), input(a.count + 1), expected(a.count);
  double previous_s = 0.005;
  bool failed = false;
  for (int call = 0; call < a.calls && !failed; ++call) {
    std::size_t count = a.count;
    if (victim && call == a.fault_call) {
      if (a.fault == "exit") {
        log.write({{"event", "exit_early"}, {"call", call}});
        return 1;  // the caller tears down and exits 0
      }
      if (a.fault == "delay") std::this_thread::sleep_for(std::chrono::duration<double>(1.5 * a.timeout_s));
      if (a.fault == "args") count = a.count + 1;
      const double within_s = a.others_late_s > 0 ? a.others_late_s : previous_s;
      if (a.fault == "kill") signal_self_after(SIGKILL, a.fault_at * within_s);
      if (a.fault == "stop") signal_self_after(SIGSTOP, a.fault_at * within_s);
    }
    if (!victim && call == a.fault_call && a.others_late_s > 0)
      std::this_thread::sleep_for(std::chrono::duration<double>(a.others_late_s));
    for (std::size_t i = 0; i < count; ++i) input[i] = buf[i] = input_value(rank, i, call);
    for (std::size_t i = 0; i < a.count; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += input_value(r, i, call);
      expected[i] = s;
    }
    const auto t0 = Clock::now();
    nlohmann::json j{{"event", "call"}, {"call", call}, {"count", count}};
    try {
      comm.allreduce(buf.data(), count, opts);
      j["ok"] = true;
    } catch (const Error& e) {
      j["ok"] = false;
      j["code"] = to_string(e.code());
      j["message"] = std::string(e.what()).substr(0, 400);
      failed = true;
    }
    previous_s = seconds(t0);
    j["seconds"] = previous_s;
    const bool untouched = std::memcmp(buf.data(), input.data(), count * sizeof(float)) == 0;
    const bool reduced = count == a.count && std::memcmp(buf.data(), expected.data(), count * sizeof(float)) == 0;
    j["buffer"] = reduced ? "reduced" : untouched ? "untouched" : "mixed";
    log.write(j);
  }
  if (failed && a.frontend == "mpi") {
    // MPI has no way to withdraw a send: after a timeout, sends still pending read this rank's
    // buffer whenever the late peer arrives, until MPI_Finalize (Open MPI crashes reading freed
    // memory otherwise). docs/reliability.md asks callers to keep it until then; so does this one.
    static std::vector<std::vector<float>> kept;
    kept.push_back(buf);
    buf.swap(kept.back());
  }
  if (failed) {
    // After a timeout or a dead peer the communicator is broken: the next call fails at once,
    // with no peer involved. After a mismatch on a new configuration (every rank raised, the
    // buffers untouched) it stays usable: the next call, the same on every rank, succeeds.
    for (std::size_t i = 0; i < a.count; ++i) buf[i] = input_value(rank, i, a.calls);
    const auto t0 = Clock::now();
    nlohmann::json j{{"event", "after_error"}};
    try {
      comm.allreduce(buf.data(), a.count, opts);
      j["ok"] = true;
    } catch (const Error& e) {
      j["ok"] = false;
      j["code"] = to_string(e.code());
    }
    j["seconds"] = seconds(t0);
    bool reduced = true;
    for (std::size_t i = 0; i < a.count && reduced; ++i) {
      float s = 0;
      for (int r = 0; r < n; ++r) s += input_value(r, i, a.calls);
      reduced = buf[i] == s;
    }
    j["reduced"] = reduced;
    log.write(j);
  }
  return 0;
}

// Restart (--recover): whatever happened, every live rank tears down, re-creates the
// communicator (MPI: a new dup once every rank is back, the stopped one included; UCX: new
// keys in the store, a killed rank relaunched by the harness joins them) and runs one call,
// which must give exactly the sum.
void recover(const Args& a, int generation, Log* log_or_null, std::unique_ptr<Log>& log) {
  wait_for_fault_to_pass();
  const auto t0 = Clock::now();
  std::unique_ptr<Comm> comm;
  if (a.frontend == "mpi") {
    MPI_Barrier(MPI_COMM_WORLD);
    comm = std::make_unique<MpiComm>();
  } else {
    comm = std::make_unique<UcxComm>(a.timeout_s, generation, 4 * (a.timeout_s * 1.1 + 2) + 10);
  }
  if (!log_or_null) log = std::make_unique<Log>(a.out + "/rank" + std::to_string(comm->rank()) + ".jsonl");
  const int n = comm->nranks(), rank = comm->rank();
  std::vector<float> buf(a.count);
  for (std::size_t i = 0; i < a.count; ++i) buf[i] = input_value(rank, i, a.calls + 1);
  nlohmann::json j{{"event", "recovered"}};
  Options opts;
  opts.algorithm = parse_algorithm(a.algo);
  try {
    comm->allreduce(buf.data(), a.count, opts);
    j["ok"] = true;
  } catch (const Error& e) {
    j["ok"] = false;
    j["message"] = std::string(e.what()).substr(0, 400);
  }
  bool reduced = true;
  for (std::size_t i = 0; i < a.count && reduced; ++i) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += input_value(r, i, a.calls + 1);
    reduced = buf[i] == s;
  }
  j["reduced"] = reduced;
  comm->teardown();
  j["seconds"] = seconds(t0);
  log->write(j);
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  const bool mpi = a.frontend == "mpi";
  if (mpi) MPI_Init(&argc, &argv);
  int code = 0;
  {
    std::unique_ptr<Comm> comm;
    std::unique_ptr<Log> log;
    // The first communicator and its calls. Making it may fail when a peer leaves right at the
    // start (UCX: its worker is gone while this rank still connects to it); a survivor then
    // goes on to the restart like any other, as torchrun's restarted workers would.
    auto setup_error = [&](const Error& e) {
      std::fprintf(stderr, "fault_worker: %s\n", e.what());
      if (!log) {
        const char* r = std::getenv("RANK");
        int rank = r ? std::atoi(r) : 0;
        if (mpi) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        log = std::make_unique<Log>(a.out + "/rank" + std::to_string(rank) + ".jsonl");
      }
      log->write({{"event", "setup_error"}, {"message", e.what()}});
    };
    try {
      const char* relaunched = std::getenv("STRAGGLAR_FAULT_RELAUNCHED");
      if (relaunched == nullptr || std::strcmp(relaunched, "1") != 0) {
        try {
          if (mpi)
            comm = std::make_unique<MpiComm>();
          else
            comm = std::make_unique<UcxComm>(a.timeout_s, 0, a.timeout_s);
        } catch (const Error& e) {
          setup_error(e);
        }
        if (comm) {
          log = std::make_unique<Log>(a.out + "/rank" + std::to_string(comm->rank()) + ".jsonl");
          log->write({{"event", "start"}, {"pid", ::getpid()}});
          run(a, *comm, *log);
          const auto t0 = Clock::now();
          comm->teardown();
          comm.reset();
          log->write({{"event", "teardown"}, {"seconds", seconds(t0)}});
        }
      }
      if (a.recover) recover(a, 1, log.get(), log);
    } catch (const Error& e) {
      // Making the re-created communicator failed: the harness reports the missing recovery.
      setup_error(e);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fault_worker: %s\n", e.what());
      code = 3;
    }
  }
  if (mpi) MPI_Finalize();
  return code;
}
