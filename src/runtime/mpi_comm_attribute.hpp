// Per-communicator state kept as an MPI communicator attribute, for the MPI front-ends (the C++
// front-end's private duplicate, engine and session: mpi_allreduce.cpp; the PMPI preload's
// announcement: src/pmpi). A state is deleted with its communicator (MPI_Comm_free), and every
// state still alive is deleted when MPI_Finalize deletes MPI_COMM_SELF's attributes, which it
// does first, while MPI is fully usable (MPI_COMM_WORLD's attributes are not reliably deleted at
// a usable moment).
#pragma once
#include <mpi.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace stragglar::detail {

// The entry points the registry calls: MPI's, or the profiling interface's (a PMPI library calls
// PMPI_*, so that a tool's MPI_* wrappers never see the library's own bookkeeping).
struct MpiAttributeCalls {
  decltype(&PMPI_Comm_create_keyval) create_keyval;
  decltype(&PMPI_Comm_set_attr) set_attr;
  decltype(&PMPI_Comm_get_attr) get_attr;
  decltype(&PMPI_Comm_delete_attr) delete_attr;
};
inline const MpiAttributeCalls kMpiAttributeCalls{MPI_Comm_create_keyval, MPI_Comm_set_attr, MPI_Comm_get_attr,
                                                  MPI_Comm_delete_attr};
inline const MpiAttributeCalls kPmpiAttributeCalls{PMPI_Comm_create_keyval, PMPI_Comm_set_attr, PMPI_Comm_get_attr,
                                                   PMPI_Comm_delete_attr};

// One attribute (keyval) holding a State per communicator. Make it once and never destroy it
// (`static auto& a = *new CommAttribute<S>(...)`): MPI calls it back until MPI_Finalize.
template <class State>
class CommAttribute {
 public:
  // `at_finalize` runs at MPI_Finalize once every state has been deleted.
  explicit CommAttribute(const MpiAttributeCalls& calls, void (*at_finalize)() = nullptr)
      : calls_(calls), at_finalize_(at_finalize) {}
  CommAttribute(const CommAttribute&) = delete;
  CommAttribute& operator=(const CommAttribute&) = delete;

  // MPI_SUCCESS and the state attached to `comm` in `out` (nullptr: none), or MPI's error code.
  int find(MPI_Comm comm, State*& out) {
    out = nullptr;
    if (const int rc = ensure_keyvals(); rc != MPI_SUCCESS) return rc;
    void* attr = nullptr;
    int found = 0;
    if (const int rc = calls_.get_attr(comm, keyval_, &attr, &found); rc != MPI_SUCCESS) return rc;
    if (found) out = static_cast<State*>(attr);
    return MPI_SUCCESS;
  }

  // Attaches `state` to `comm` (owned from now on; `out` points to it): MPI_SUCCESS, or MPI's
  // error code with the state deleted.
  int attach(MPI_Comm comm, std::unique_ptr<State> state, State*& out) {
    out = nullptr;
    if (const int rc = ensure_keyvals(); rc != MPI_SUCCESS) return rc;
    if (const int rc = calls_.set_attr(comm, keyval_, state.get()); rc != MPI_SUCCESS) return rc;
    out = state.release();
    std::lock_guard<std::mutex> lock(mutex_);
    live_.emplace(out, comm);
    return MPI_SUCCESS;
  }

 private:
  int ensure_keyvals() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (keyval_ != MPI_KEYVAL_INVALID) return MPI_SUCCESS;
    int keyval = MPI_KEYVAL_INVALID, self_keyval = MPI_KEYVAL_INVALID;
    if (const int rc = calls_.create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, this); rc != MPI_SUCCESS)
      return rc;
    if (const int rc = calls_.create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &self_keyval, this); rc != MPI_SUCCESS)
      return rc;
    if (const int rc = calls_.set_attr(MPI_COMM_SELF, self_keyval, nullptr); rc != MPI_SUCCESS) return rc;
    keyval_ = keyval, self_keyval_ = self_keyval;
    return MPI_SUCCESS;
  }

  // The state is deleted outside the lock: its destructor may wait (the MPI front-end settles
  // what a timeout left pending) and take locks of its own.
  static int delete_state(MPI_Comm, int, void* attr, void* extra) {
    auto* self = static_cast<CommAttribute*>(extra);
    auto* state = static_cast<State*>(attr);
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      self->live_.erase(state);
    }
    delete state;
    return MPI_SUCCESS;
  }

  static int finalize_hook(MPI_Comm, int, void*, void* extra) {
    auto* self = static_cast<CommAttribute*>(extra);
    std::vector<MPI_Comm> comms;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      for (const auto& [state, comm] : self->live_) comms.push_back(comm);
    }
    for (MPI_Comm comm : comms) self->calls_.delete_attr(comm, self->keyval_);
    if (self->at_finalize_) self->at_finalize_();
    return MPI_SUCCESS;
  }

  const MpiAttributeCalls& calls_;
  void (*at_finalize_)();
  std::mutex mutex_;
  int keyval_ = MPI_KEYVAL_INVALID;
  int self_keyval_ = MPI_KEYVAL_INVALID;
  std::map<State*, MPI_Comm> live_;
};

}  // namespace stragglar::detail
