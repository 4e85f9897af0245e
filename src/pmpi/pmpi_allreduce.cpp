// libstragglar_pmpi_<mpi>.so: MPI_Allreduce through stragglar for unmodified programs, over the
// MPI profiling interface (docs/preload.md). Preloaded (LD_PRELOAD, or the
// stragglar-run launcher) or linked before libmpi, this MPI_Allreduce is the one the program
// calls; it serves a call through the runtime core (stragglar::allreduce, the MPI front-end in
// src/runtime: auto by default, STRAGGLAR_ALGORITHM etc. honoured) when it can do so exactly,
// and hands every other call unchanged to PMPI_Allreduce.
//
// The decision must be the same on every rank, or one rank would wait in stragglar's messages
// while another waits in MPI's: it reads only what MPI requires ranks to agree on — the op, the
// element type's kind and size and the count (mpi_signature.hpp), the communicator (inter or
// intra, its size), the environment and the thread level — never a rank's memory layout or pointers.
//
// The gate (settings, counters, re-entrancy, announcements) is runtime/preload_gate.hpp, shared
// with the NCCL preload; per-communicator state lives in communicator attributes
// (runtime/mpi_comm_attribute.hpp): the runtime core's (the private duplicate, engine and
// session) and ours (an announced communicator), both freed by MPI_Comm_free and at MPI_Finalize.
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <type_traits>

#include "pmpi/mpi_signature.hpp"
#include "runtime/mpi_comm_attribute.hpp"
#include "runtime/mpi_session.hpp"
#include "runtime/preload_gate.hpp"
#include "stragglar/allreduce.hpp"
#include "stragglar/error.hpp"

namespace stragglar::pmpi {
namespace {

// Read at the first MPI_Allreduce (preload_gate.hpp); the threshold's default (64 KiB) was
// measured on 8 ranks (docs/preload.md "Choosing the threshold"). Every thread level is served:
// MPI already forbids concurrent collectives on one communicator, and the runtime keeps one
// session per communicator (its process-wide parts — plan cache, keyvals, environment — are
// locked), so threads calling on different communicators run independently (docs/preload.md
// "Threads").
struct PmpiPreload;
using Gate = detail::PreloadGate<PmpiPreload, MPI_Comm>;
// Made when the library is loaded, never destroyed (MPI calls back into it until MPI_Finalize),
// reached without a guard.
Gate& g_gate = *new Gate(&detail::RuntimeConfig::pmpi_min_bytes);
Gate& gate() { return g_gate; }

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

// ---- STRAGGLAR_DEBUG=INFO: one line per communicator, on its rank 0 ----------------------------
// Under it, at MPI_Finalize: on MPI_COMM_WORLD's rank 0, how many calls went where.
void say_counts() {
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0)
    std::fprintf(stderr, "stragglar-pmpi: rank 0: %lld MPI_Allreduce calls went through stragglar, %lld passed through to MPI\n",
                 gate().served(), gate().passed());
}

// An announced communicator's attribute: its freeing lets a new one with the same handle be
// announced (mpi_comm_attribute.hpp; PMPI_* calls, as everywhere in a profiling library).
class Announced {
 public:
  explicit Announced(MPI_Comm comm) : comm_(comm) {}
  ~Announced() { gate().forget(comm_); }
  Announced(const Announced&) = delete;
  Announced& operator=(const Announced&) = delete;

 private:
  MPI_Comm comm_;
};
detail::CommAttribute<Announced>& announced() {
  static auto& a = *new detail::CommAttribute<Announced>(detail::kPmpiAttributeCalls, say_counts);
  return a;
}

void announce(MPI_Comm comm, const detail::PreloadSettings& s, const char* pass_reason) {
  if (!gate().first_sight(comm)) return;
  Announced* attached = nullptr;
  if (announced().attach(comm, std::make_unique<Announced>(comm), attached) != MPI_SUCCESS) return;
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
  gate().pass();
  return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
}
#if MPI_VERSION >= 4
int pass(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  gate().pass();
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
  if (Gate::inside()) {  // not counted: the runtime's own call
    if constexpr (std::is_same_v<Count, int>) return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
#if MPI_VERSION >= 4
    else return PMPI_Allreduce_c(sendbuf, recvbuf, count, type, op, comm);
#endif
  }
  // The small-message path first, before any lookup: no type we serve is wider than 8 bytes.
  if (gate().passes_below(static_cast<std::size_t>(count) * 8)) return pass(sendbuf, recvbuf, count, type, op, comm);
  const detail::PreloadSettings& s = gate().settings();
  if (s.error) return raise(comm, s.error->code(), s.error->what());
  if (comm == MPI_COMM_NULL) return pass(sendbuf, recvbuf, count, type, op, comm);  // MPI reports it
  if (s.debug) announce(comm, s, comm_pass_reason(comm));
  const std::optional<ReduceOp> rop = reduce_op(op);
  if (!rop) return pass(sendbuf, recvbuf, count, type, op, comm);
  const std::optional<Signature> sig = signature_of(static_cast<long long>(count), type);
  if (!sig || sig->elements == 0 || sig->elements * size_of(sig->dtype) < s.min_bytes)
    return pass(sendbuf, recvbuf, count, type, op, comm);
  if (comm_pass_reason(comm)) return pass(sendbuf, recvbuf, count, type, op, comm);

  const auto serving = gate().serve();
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
  if (served) *served = stragglar::pmpi::gate().served();
  if (passed) *passed = stragglar::pmpi::gate().passed();
}

}  // extern "C"
