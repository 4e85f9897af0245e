// Engine: what a front-end supplies to the runtime core (session.hpp; docs/runtime.md). Five things an engine must supply — its Transport, its Device, a
// small agreement collective, its native AllReduce, and a timer for auto — and five small
// defaults. The base holds no state. The Session owns the one timeout: it sets it on the
// transport (Transport::set_timeout) and passes it to every other wait below (timeout_s), so an
// engine never keeps a timeout of its own in step by hand.
#pragma once
#include <cstddef>
#include <memory>
#include <cstdint>
#include <optional>
#include <span>

#include "runtime/auto_cost_model.hpp"
#include "runtime/call_timer.hpp"
#include "runtime/device.hpp"
#include "runtime/hosts.hpp"
#include "runtime/transport.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

class Engine {
 public:
  virtual ~Engine() = default;

  // ---- what every engine supplies ------------------------------------------------------------
  // Where the schedules' messages go (the executor's rounds; the session sets its timeout).
  virtual Transport& transport() = 0;
  // Where buffers live and how they are reduced.
  virtual Device& device() = 0;
  // Element-wise maximum of `values` over all ranks, in place, within `timeout_s` (the
  // session's, the one its transport has too: an agreement run over the transport may rely on
  // the transport's). On a timeout it throws Error(Timeout) and must leave nothing pending that
  // writes to `values` (stage through engine-owned memory and keep it alive); Error(SystemError)
  // for an engine failure. Used once per new configuration (and by HostCallTimer's exchange,
  // unless the engine's timer splits it: MpiSplitAllgather).
  virtual void agree_max(std::span<std::int64_t> values, double timeout_s) = 0;
  // What auto's native call must honour: the session's timeout, and the configuration's tag
  // (for an engine that moves the data through its transport).
  struct NativeBound {
    double timeout_s;
    int tag;
  };
  // The engine's own AllReduce of count elements (sendbuf == recvbuf: in place). Without a
  // bound it is `native` named by the user, with the engine's own behaviour on a dead peer. With
  // one it is auto running native: auto is the default, and the default must keep the timeout
  // promise whatever it picks, so an engine whose native can block forever runs a bounded form,
  // one that returns within the timeout (the MPI engine's is in mpi_engine.hpp). A native bounded
  // already (NCCL polled with the transport's timeout, Gloo with its own) ignores the bound.
  // `keep_buffer` (in place, only for an engine whose buffers_on_error() is native_stages): the
  // caller reads its buffer after an error (Session: STRAGGLAR_KEEP_BUFFERS and the front-end's
  // error rule), so a call that throws must leave recvbuf as it was, now and later; false: it
  // may run on the caller's buffer and leave it undefined after an error, as MPI and Gloo do.
  virtual void native_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType t, ReduceOp op,
                                std::optional<NativeBound> bound, bool keep_buffer) = 0;
  // A timer for one auto configuration (call_timer.hpp): times its calls and runs its exchange.
  // A host engine returns a HostCallTimer over its agree_max; a GPU engine times its stream.
  // One per configuration, never shared: with a lag, a configuration leaves its last calls
  // untaken when the next call is another configuration's (docs/auto.md "Lags").
  virtual std::unique_ptr<CallTimer> make_timer() = 0;

  // ---- defaults --------------------------------------------------------------------------------
  // Called when an auto configuration is created: size whatever a bounded native of
  // `native_bytes` (with `native_keeps_buffer`, as native_allreduce's keep_buffer) and an
  // agreement of `agreement_values` values need (0: none), so that its calls allocate nothing.
  // Never shrinks.
  virtual void reserve(std::size_t /*native_bytes*/, bool /*native_keeps_buffer*/, std::size_t /*agreement_values*/) {}
  // Why these buffers cannot be used by this engine, beyond the core's own checks (NULL,
  // partial overlap), or nullptr; e.g. MPI's MPI_IN_PLACE passed as recvbuf. Builds no string.
  virtual const char* buffer_problem(const void* /*sendbuf*/, const void* /*recvbuf*/) const { return nullptr; }
  // The cost model auto decides with when the user gave none (Options::cost, STRAGGLAR_*): its
  // small-message gate, exchange cadence and predictions (auto_cost_model.hpp). The default,
  // env().cost, is the GPU model; host engines (host_engine.hpp) return
  // host_engine_auto_cost_model(). The same
  // on every rank (every rank has the same engine); agreed with each auto configuration.
  virtual CostModel auto_cost_model() const { return env().cost; }
  // Whether auto starts with this engine's native and keeps it until a schedule is measured
  // faster (PolicyConfig::start_with_native): NCCL's, whose collective beats every schedule of
  // point-to-point rounds when nobody is late. Host engines start with the model's best
  // (docs/auto.md has the measurements).
  virtual bool auto_starts_with_native() const { return false; }
  // Whether auto's first call of a configuration measures native (it has no model to rank it by).
  // false: the first call runs the model's best, and native is measured later, its first run a
  // first-use measurement (PolicyConfig::first_call_measures_native): for an engine whose native
  // pays first-use costs at every new size, which a configuration called once then never pays.
  virtual bool auto_first_call_measures_native() const { return true; }
  // How many untimed runs of the bounded native auto's first call of a configuration makes
  // before the one it measures (AutoHost::warm_up_native): enough that native's next
  // measurement, the one that counts, is warm (docs/auto.md "The first calls"). Two by default
  // (NCCL connects its channels in its first collectives). The MPI engine runs none: it readies
  // its native's temporaries in reserve() instead, which made auto's first call cheaper than
  // warming up (docs/runtime.md "First-call costs").
  virtual int native_warm_ups() const { return 2; }
  // How a call in place that raises leaves the caller's buffer (STRAGGLAR_KEEP_BUFFERS=1, the
  // default, asks for "as it was"; out of place, sendbuf is never written and recvbuf is
  // undefined after an error, as in MPI):
  //   session_restores  the session copies it before the call and puts the copy back when the
  //                     call raises (host memory, written only by the transport's receives and
  //                     the device's reduces: after a failure nothing writes it any more)
  //   native_stages     as session_restores, except around the native, which is told so
  //                     (native_allreduce's keep_buffer) and leaves recvbuf as it was by itself
  //                     when it throws: it writes only engine memory until it has the result (a
  //                     native that cannot be cancelled would write after a restore: MPI's
  //                     MPI_Iallreduce, torch's Gloo thread)
  //   undefined         nothing is kept (NCCL: a stream that may never finish still targets it,
  //                     so a restore could not be ordered after it; as NCCL itself)
  enum class BuffersOnError { session_restores, native_stages, undefined };
  virtual BuffersOnError buffers_on_error() const { return BuffersOnError::session_restores; }
  // Where this rank runs, for the hosts of the communicator (hosts.hpp): equal on the ranks of
  // one host. The default is the host name's hash; test engines give threads hosts of their own.
  virtual std::int64_t host_id() const { return this_host_id(); }
  // Which monotonic clock this rank's host timer reads (hosts.hpp this_clock_id): ranks with equal
  // ids order their calls' entries and exits on it (auto's exact exposed time); -1: none shared.
  virtual std::int64_t clock_id() const { return this_clock_id(); }
  // Whether a call's arrival is its host thread's entry, so that arrival tickets can order the
  // ranks (docs/arrival-tickets.md): host engines. Not on a GPU stream, where the arrival that
  // matters is the stream's.
  virtual bool arrivals_on_host() const { return false; }
};

}  // namespace stragglar::detail
