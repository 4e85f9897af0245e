// The MPI front-end: stragglar::allreduce on an MPI communicator (include/stragglar/allreduce.hpp).
//
// Thin by design: the runtime core (session.hpp) does the work and the engine is in
// mpi_engine.{hpp,cpp}. Here: per communicator (an MPI attribute, freed with the communicator
// or at MPI_Finalize: mpi_comm_attribute.hpp) a private MPI_Comm_idup with MPI_ERRORS_RETURN,
// its MpiEngine and Session.
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/env.hpp"
#include "runtime/mpi_comm_attribute.hpp"
#include "runtime/mpi_engine.hpp"
#include "runtime/mpi_session.hpp"
#include "stragglar/allreduce.hpp"

namespace stragglar {
namespace {

// What a timeout left pending when its communicator was freed: auto's bounded MPI_Iallreduce (a
// collective: MPI cannot cancel it) and the engine memory it uses. Kept until MPI_Finalize
// (settle_orphans), never freed under it.
struct Orphan {
  std::unique_ptr<detail::MpiEngine> engine;
};
std::mutex g_comm_mutex;
std::vector<Orphan> g_orphans;

// One per user communicator, kept as an MPI attribute (mpi_comm_attribute.hpp).
struct CommState {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request idup = MPI_REQUEST_NULL;  // still pending when the idup timed out
  std::optional<Error> setup_error;
  std::unique_ptr<detail::MpiEngine> engine;
  std::unique_ptr<detail::Session> session;

  // Operations a timeout left pending must complete before their memory and their
  // communicators go: an MPI_Comm_idup still in flight at MPI_Finalize crashes Open MPI, and a
  // pending MPI_Iallreduce writes the engine's buffers. Each gets up to STRAGGLAR_TIMEOUT_S
  // more (the late peer has usually arrived by now); whatever is still pending after that
  // on our own communicator becomes an orphan, which MPI_Finalize waits for once more.
  ~CommState() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    const bool broken = session && session->broken();
    session.reset();
    if (finalized) {  // nothing may call MPI any more; the handles die with the process
      (void)engine.release();
      return;
    }
    // At least a second even under a tiny STRAGGLAR_TIMEOUT_S: an idup every rank has posted
    // needs a few progress rounds.
    const double timeout_s = std::max(detail::cleanup_timeout_s(), 1.0);
    // The idup runs on the user's communicator, which is freed right after this (we are its
    // attribute's delete callback), and Open MPI's idup does not keep it alive: progressing
    // the idup afterwards, once the late rank joins, crashes (SIGSEGV in
    // mca_pml_ob1_recv_req_start from libnbc). So it gets longer here: twice the
    // timeout + 2 s. A rank later still than that can crash this one's MPI (documented in
    // docs/reliability.md); one that never comes cannot.
    if (!detail::settle_request(idup, 2 * detail::cleanup_timeout_s() + 2.0)) {
      (void)engine.release();
      return;  // the idup's new communicator never came to exist: nothing to free
    }
    // A failed call leaves messages in flight on our communicator (its sends, "gave up"
    // notices). Freed, its context id goes to the next communicator Open MPI makes, and they
    // would be matched there (the harness's --recover trials: a re-created communicator's first
    // call received them). So a broken session's communicator is kept until MPI_Finalize, and
    // so is one on which auto's last exchange had to be cancelled (MpiSplitAllgather).
    if (!broken && !(engine && engine->stray_messages_possible()) && dup != MPI_COMM_NULL) MPI_Comm_free(&dup);
    if (!engine || engine->settle(timeout_s)) {
      engine.reset();
      return;
    }
    // auto's bounded native, still pending: waited for again at MPI_Finalize.
    std::lock_guard<std::mutex> lock(g_comm_mutex);
    g_orphans.push_back(Orphan{std::move(engine)});
  }
};

// MPI_Finalize, once every state is deleted. Open MPI crashes (in libnbc's progress) when a
// collective a timeout left pending still runs as MPI_Finalize tears the library down, the late
// peer having joined meanwhile. Every rank is in MPI_Finalize or on its way, so the late one
// usually joins now: wait for them, 3 x STRAGGLAR_TIMEOUT_S (>= 3 s) for all. One that a peer
// never joins (it went on to another call) stays pending and never moves: leaked.
void settle_orphans() {
  std::vector<Orphan> orphans;
  {
    std::lock_guard<std::mutex> lock(g_comm_mutex);
    orphans.swap(g_orphans);
  }
  const double deadline = MPI_Wtime() + std::max(3 * detail::cleanup_timeout_s(), 3.0);
  for (Orphan& o : orphans) {
    if (!o.engine->settle(std::max(deadline - MPI_Wtime(), 0.0))) {
      (void)o.engine.release();
      continue;
    }
    o.engine.reset();
  }
}

detail::CommAttribute<CommState>& comm_states() {
  static auto& states = *new detail::CommAttribute<CommState>(detail::kMpiAttributeCalls, settle_orphans);
  return states;
}

constexpr const char* kApi = "stragglar::allreduce";

CommState& state_for(MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  require(initialized && !finalized,
          "stragglar::allreduce: MPI is not initialized (or already finalized); call MPI_Init first");
  require(comm != MPI_COMM_NULL, "stragglar::allreduce: comm is MPI_COMM_NULL, expected a communicator");
  CommState* found = nullptr;
  check_mpi(comm_states().find(comm, found), "MPI_Comm_get_attr");
  if (found) {
    if (found->setup_error)
      throw Error(found->setup_error->code(), std::string(kApi) + ": this communicator is unusable after an earlier failure (" +
                                                  found->setup_error->what() + "); free it and create a new one");
    return *found;
  }
  int inter = 0;
  check_mpi(MPI_Comm_test_inter(comm, &inter), "MPI_Comm_test_inter");
  require(!inter, "stragglar::allreduce: comm is an intercommunicator, expected an intracommunicator");
  const detail::RuntimeConfig& e = detail::env();
  // Attached before the collective idup, so that a timed-out idup leaves a broken state behind
  // (later calls fail at once) and nobody frees a communicator still being created.
  CommState* st = nullptr;
  check_mpi(comm_states().attach(comm, std::make_unique<CommState>(), st), "MPI_Comm_set_attr");
  try {
    check_mpi(MPI_Comm_idup(comm, &st->dup, &st->idup), "MPI_Comm_idup");
    wait_with_timeout(st->idup, e.timeout_s, "MPI_Comm_idup (the first stragglar call on this communicator)");
    check_mpi(MPI_Comm_set_errhandler(st->dup, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    st->engine = std::make_unique<detail::MpiEngine>(st->dup, e);
    st->session = std::make_unique<detail::Session>(*st->engine, kApi);
  } catch (const Error& err) {
    st->setup_error = Error(err.code(), std::string(kApi) + ": " + err.what());
    throw *st->setup_error;
  }
  return *st;
}

}  // namespace

namespace detail {
Session& mpi_session(MPI_Comm comm) { return *state_for(comm).session; }
}  // namespace detail

void allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op, MPI_Comm comm,
               const Options& opts) {
  detail::Session& session = *state_for(comm).session;
  session.allreduce(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf, recvbuf, count, dtype, op, opts);
}

StragglerReport straggler_report(MPI_Comm comm) { return state_for(comm).session->auto_report(); }

}  // namespace stragglar
