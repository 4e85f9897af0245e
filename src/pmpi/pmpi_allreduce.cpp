// libstragglar_pmpi_<mpi>.so: MPI_Allreduce through stragglar for unmodified programs, over the
// MPI profiling interface (docs/preload.md; issue #21). Preloaded (LD_PRELOAD, or the
// stragglar-run launcher) or linked before libmpi, this MPI_Allreduce is the one the program
// calls; it serves a call through the runtime core (stragglar::allreduce, the MPI front-end in
// src/runtime: auto by default, STRAGGLAR_ALGORITHM etc. honoured) when it can do so exactly,
// and hands every other call unchanged to PMPI_Allreduce.
//
// The decision must be the same on every rank, or one rank would wait in stragglar's messages
// while another waits in MPI's: it reads only what MPI requires ranks to agree on — the op, the
// element type's kind and size and the count (mpi_signature.hpp), the communicator (inter or intra, its size), the
// environment and the thread level — never a rank's memory layout or pointers.
//
// Per-communicator state lives in communicator attributes: the runtime core's (the private
// duplicate, engine and session; src/runtime/mpi_allreduce.cpp) and ours (the debug line's
// flag), both freed by MPI_Comm_free and at MPI_Finalize.
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "pmpi/mpi_signature.hpp"
#include "runtime/env.hpp"
#include "runtime/mpi_session.hpp"
#include "stragglar/allreduce.hpp"
#include "stragglar/error.hpp"
#include "stragglar/options.hpp"
#include "stragglar/units.hpp"

namespace stragglar::pmpi {
namespace {

// Below this many bytes a call passes through by default: measured on 8 ranks (docs/preload.md
// "Choosing the threshold").
constexpr std::size_t kDefaultMinBytes = std::size_t{64} << 10;

// Read once, at the first MPI_Allreduce. Every thread level is served: MPI already forbids
// concurrent collectives on one communicator, and the runtime keeps one session per
// communicator (its process-wide parts — plan cache, keyvals, environment — are locked), so
// threads calling on different communicators run independently (docs/preload.md "Threads").
struct Settings {
  std::size_t min_bytes = kDefaultMinBytes;
  Options options;
  bool debug = false;
  std::optional<Error> error;    // a malformed variable: every call reports it
};

Settings read_settings() {
  Settings s;
  try {
    s.debug = detail::env().debug_info;
    s.options = options_from_env();
    if (const char* v = std::getenv("STRAGGLAR_PMPI_MIN_BYTES"); v && *v) {
      try {
        s.min_bytes = std::string_view(v) == "0" ? 0 : parse_bytes(v);
      } catch (const Error& e) {
        throw Error(ErrorCode::InvalidUsage, std::string("STRAGGLAR_PMPI_MIN_BYTES='") + v +
                                                 "' is not valid: expected a size in bytes (0, 4096, 64K, 1M): " + e.what());
      }
    }
  } catch (const Error& e) {
    s.error = e;
  }
  return s;
}

const Settings& settings() {
  static const Settings s = read_settings();  // after the first call: one load of the guard
  return s;
}

// Counts for tests and the debug output (stragglar_pmpi_counts). Bumped with a relaxed load and
// store, not fetch_add: no locked instruction on the pass-through path (threads calling at once
// may lose a count; nothing but the statistics depends on it).
std::atomic<long long> g_served{0}, g_passed{0};
inline void bump(std::atomic<long long>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// Set while stragglar runs a served call: MPI_Allreduce called from inside the runtime (the
// `native` algorithm) must reach MPI, not come back here.
// initial-exec: a preloaded library has static TLS, so reading it is one instruction.
__attribute__((tls_model("initial-exec"))) thread_local bool t_inside = false;

// ---- errors through the communicator's error handler ------------------------------------------
// One MPI error class per stragglar ErrorCode, made on first use; before raising, the class's
// string is set to the error's message, so MPI_Error_string and MPI_ERRORS_ARE_FATAL's report
// show it.
int error_code_for(ErrorCode code, const std::string& message) {
  static int codes[7];
  static std::once_flag once;
  static std::mutex string_mutex;
  std::call_once(once, [] {
    for (int& c : codes) {
      int cls = MPI_ERR_OTHER;
      if (PMPI_Add_error_class(&cls) != MPI_SUCCESS || PMPI_Add_error_code(cls, &c) != MPI_SUCCESS) c = MPI_ERR_OTHER;
    }
  });
  const int c = codes[static_cast<int>(code) % 7];
  if (c != MPI_ERR_OTHER) {
    std::lock_guard<std::mutex> lock(string_mutex);
    std::string text = "stragglar (" + std::string(to_string(code)) + "): " + message;
    if (text.size() >= MPI_MAX_ERROR_STRING) text.resize(MPI_MAX_ERROR_STRING - 1);
    PMPI_Add_error_string(c, text.c_str());
  }
  return c;
}

int raise(MPI_Comm comm, ErrorCode code, const std::string& message) {
  const int c = error_code_for(code, message);
  // MPI_ERRORS_ARE_FATAL aborts inside; MPI_ERRORS_RETURN (or a user handler that returns)
  // gets the code back, as from MPI itself.
  PMPI_Comm_call_errhandler(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, c);
  return c;
}

// Whether an error on `comm` ends the process (MPI_ERRORS_ARE_FATAL, MPI's default, or
// MPI_ERRORS_ABORT): its caller never sees a failed call's buffer, so the runtime keeps no copy
// of it (one pass over the buffer per call saved; docs/reliability.md class 6).
bool errors_end_the_process(MPI_Comm comm) {
  MPI_Errhandler handler = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(comm, &handler) != MPI_SUCCESS) return false;
  bool fatal = handler == MPI_ERRORS_ARE_FATAL;
#ifdef MPI_ERRORS_ABORT
  fatal = fatal || handler == MPI_ERRORS_ABORT;
#endif
  PMPI_Errhandler_free(&handler);
  return fatal;
}

// ---- our communicator attribute: what the debug line has said -----------------------------
struct PreloadComm {
  MPI_Comm comm;
  bool announced = false;
};

std::mutex g_mutex;
int g_keyval = MPI_KEYVAL_INVALID;
int g_self_keyval = MPI_KEYVAL_INVALID;
std::set<PreloadComm*> g_comms;  // only for MPI_Finalize: MPI_COMM_WORLD's attributes may outlive it

int delete_comm(MPI_Comm, int, void* attr, void*) {
  auto* pc = static_cast<PreloadComm*>(attr);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_comms.erase(pc);
  }
  delete pc;
  return MPI_SUCCESS;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first: delete ours on every communicator then
// (and, under STRAGGLAR_DEBUG=INFO, say on MPI_COMM_WORLD's rank 0 how many calls went where).
int finalize_hook(MPI_Comm, int, void*, void*) {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (settings().debug && rank == 0)
    std::fprintf(stderr, "stragglar-pmpi: rank 0: %lld MPI_Allreduce calls went through stragglar, %lld passed through to MPI\n",
                 g_served.load(), g_passed.load());
  std::vector<MPI_Comm> comms;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (PreloadComm* pc : g_comms) comms.push_back(pc->comm);
  }
  for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, g_keyval);
  return MPI_SUCCESS;
}

PreloadComm* preload_comm(MPI_Comm comm) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_keyval == MPI_KEYVAL_INVALID) {
      if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm, &g_keyval, nullptr) != MPI_SUCCESS ||
          PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &g_self_keyval, nullptr) != MPI_SUCCESS ||
          PMPI_Comm_set_attr(MPI_COMM_SELF, g_self_keyval, nullptr) != MPI_SUCCESS)
        return nullptr;
    }
  }
  void* attr = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, g_keyval, &attr, &found) != MPI_SUCCESS) return nullptr;
  if (found) return static_cast<PreloadComm*>(attr);
  auto* pc = new PreloadComm{comm};
  if (PMPI_Comm_set_attr(comm, g_keyval, pc) != MPI_SUCCESS) {
    delete pc;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  g_comms.insert(pc);
  return pc;
}

// STRAGGLAR_DEBUG=INFO: one line per communicator, on its rank 0, saying what goes through.
void announce(MPI_Comm comm, const Settings& s, const char* pass_reason) {
  PreloadComm* pc = preload_comm(comm);
  if (!pc || pc->announced) return;
  pc->announced = true;
  int rank = 0, size = 0, len = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  if (rank != 0) return;
  char name[MPI_MAX_OBJECT_NAME] = {};
  PMPI_Comm_get_name(comm, name, &len);
  if (pass_reason) {
    std::fprintf(stderr, "stragglar-pmpi: communicator '%s' (%d ranks): every MPI_Allreduce passes through to MPI (%s)\n",
                 len ? name : "unnamed", size, pass_reason);
    return;
  }
  std::fprintf(stderr,
               "stragglar-pmpi: communicator '%s' (%d ranks): MPI_Allreduce of float/double/int32/int64%s "
               "(C, fixed-size and Fortran names) x sum/prod/min/max, >= %zu bytes, goes "
               "through stragglar (algorithm %s); everything else passes through to MPI\n",
               len ? name : "unnamed", size,
#ifdef MPIX_C_FLOAT16
               "/float16",
#else
               "",
#endif
               s.min_bytes, to_string(s.options.algorithm));
}

// PMPI_Allreduce, or PMPI_Allreduce_c for the MPI-4 large-count form (MPICH 4 has it, and
// mpi4py calls it there).
int pass(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  bump(g_passed);
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}
#if MPI_VERSION >= 4
int pass(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  bump(g_passed);
  return PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
}
#endif

// Why every call on `comm` passes through, or nullptr when calls on it can be served.
const char* comm_pass_reason(MPI_Comm comm) {
  int inter = 0, size = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return "not a valid communicator";  // MPI_Allreduce reports it
  if (inter) return "an intercommunicator";
  if (size < 2) return "one rank: no straggler to wait for";
  return nullptr;
}

// Count: int (MPI_Allreduce) or MPI_Count (MPI_Allreduce_c).
template <class Count>
int allreduce_or_pass(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  if (t_inside) {  // not counted: the runtime's own call
    if constexpr (std::is_same_v<Count, int>) return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
#if MPI_VERSION >= 4
    else return PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
#endif
  }
  const Settings& s = settings();
  // The small-message path first, before any lookup: no type we serve is wider than 8 bytes.
  if (static_cast<std::size_t>(count) * 8 < s.min_bytes && !s.debug && !s.error)
    return pass(sendbuf, recvbuf, count, type, op, comm);
  if (s.error) return raise(comm, s.error->code(), s.error->what());
  if (comm == MPI_COMM_NULL) return pass(sendbuf, recvbuf, count, type, op, comm);  // MPI reports it
  if (s.debug) announce(comm, s, comm_pass_reason(comm));
  const std::optional<ReduceOp> rop = reduce_op(op);
  if (!rop) return pass(sendbuf, recvbuf, count, type, op, comm);
  const std::optional<Signature> sig = signature_of(static_cast<long long>(count), type);
  if (!sig || sig->elements == 0 || sig->elements * size_of(sig->dtype) < s.min_bytes)
    return pass(sendbuf, recvbuf, count, type, op, comm);
  if (comm_pass_reason(comm)) return pass(sendbuf, recvbuf, count, type, op, comm);

  bump(g_served);
  t_inside = true;
  struct Leave {
    ~Leave() { t_inside = false; }
  } leave;
  try {
    detail::mpi_session(comm).set_caller_sees_buffers_after_errors(!errors_end_the_process(comm));
    allreduce(sendbuf, recvbuf, sig->elements, sig->dtype, *rop, comm, s.options);
    return MPI_SUCCESS;
  } catch (const Error& e) {
    return raise(comm, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return raise(comm, ErrorCode::SystemError, "out of memory");
  } catch (const std::exception& e) {
    return raise(comm, ErrorCode::Internal, e.what());
  }
}

}  // namespace
}  // namespace stragglar::pmpi

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return stragglar::pmpi::allreduce_or_pass(sendbuf, recvbuf, count, datatype, op, comm);
}

#if MPI_VERSION >= 4
int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm) {
  return stragglar::pmpi::allreduce_or_pass(sendbuf, recvbuf, count, datatype, op, comm);
}
#endif

// How many MPI_Allreduce calls went through stragglar and how many passed through, in this
// process (for tests and tools; found with dlsym, the program needs no header).
void stragglar_pmpi_counts(long long* served, long long* passed) {
  if (served) *served = stragglar::pmpi::g_served.load(std::memory_order_relaxed);
  if (passed) *passed = stragglar::pmpi::g_passed.load(std::memory_order_relaxed);
}

}  // extern "C"
