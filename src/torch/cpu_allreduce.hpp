// The CPU half of the backend: all_reduce of CPU tensors on a worker thread of the group,
// through the runtime core over UcxEngine (src/ucx/ucx_engine.hpp; docs/torch.md "CPU tensors").
//
// Calls are queued in the order the program makes them and run one at a time, so every rank
// runs the same sequence (the core's agreement and tags rely on it); the caller gets its Work
// at once (async_op=True returns immediately, wait() blocks). Futures complete on the worker, so
// their callbacks run there; an all_reduce or barrier a callback issues makes the worker run the
// queue, in order, up to it (enqueue, drain). The engine connects on the
// first call (UCX addresses through the group's store). A timeout or a dead peer fails that
// call and, through the core's broken state, every later one at once.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "call_records.hpp"
#include "process_group_stragglar.hpp"
#include "runtime/session.hpp"
#include "ucx/ucx_engine.hpp"

namespace stragglar::torch_backend {

// The Work of one CPU all_reduce: completed by the worker thread; its future's value is the
// list [tensor] (what DDP's default path and comm hooks read).
class CpuAllreduceWork final : public c10d::Work {
 public:
  CpuAllreduceWork(int rank, at::Tensor tensor, std::uint64_t sequence);
  // Blocks until the call ran (or `timeout`, when given, passed: then DistBackendError; the call
  // goes on); raises the call's error.
  bool wait(std::chrono::milliseconds timeout) override;
  std::vector<at::Tensor> result() override { return {tensor_}; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  uint64_t getSequencenumber() const override { return sequence_; }
  // Called once by the worker: `error` null = success. The future first (its callbacks run
  // inline, on the worker), then the Work: when wait() returns the future is complete (as Gloo).
  void complete(std::exception_ptr error);
  // The data phase is over (before complete(): the callbacks may still run). wait_executed()
  // blocks until then, without raising the call's error: a barrier orders after the data phase,
  // and must not wait for callbacks (one of which may itself call the barrier).
  void mark_executed();
  void wait_executed();
  bool executed() const;
  const at::Tensor& tensor() const noexcept { return tensor_; }

 private:
  at::Tensor tensor_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::uint64_t sequence_;
  bool executed_ = false;  // guarded by Work's mutex_
};

class CpuAllreduce {
 public:
  // `records` (the process group's, which outlives this) explains a failed call (call_records.hpp).
  CpuAllreduce(c10::intrusive_ptr<c10d::Store> store, int rank, int size, detail::UcxEngine::NativeAllreduce native,
               const CallRecords& records);
  // Lets the queued calls finish (each is bounded by its timeout), then joins the worker.
  ~CpuAllreduce();
  CpuAllreduce(const CpuAllreduce&) = delete;
  CpuAllreduce& operator=(const CpuAllreduce&) = delete;

  // Queues tensor ⊕= over ranks; `tensor` is a CPU tensor of a core dtype.
  c10::intrusive_ptr<c10d::Work> enqueue(at::Tensor tensor, DataType dtype, ReduceOp op, const Options& options,
                                         std::chrono::milliseconds timeout, std::uint64_t sequence);
  // Between calls (waits for the one running): the core's last choice and auto's state.
  GroupReport report();
  std::string describe_peer(int peer);
  // Stops taking calls; the ones queued fail with `why`.
  void stop(const std::string& why);
  // Whether the caller is this group's worker (a future's callback runs there).
  bool on_worker() const { return std::this_thread::get_id() == worker_.get_id(); }
  // Blocks until every call queued so far has run (a barrier orders after them).
  void drain();
  // Connects the UCX engine now (at group creation, when every rank is there), so a
  // rank whose first all_reduce comes late meets the normal timeout, not a connect that read
  // whatever the store held. A failure is kept: every call then raises it.
  void connect_now(double timeout_s);

 private:
  struct Job {
    c10::intrusive_ptr<CpuAllreduceWork> work;
    DataType dtype;
    ReduceOp op;
    Options options;
    double timeout_s;
  };
  void run();
  void run_job(const Job& job);  // execute, then complete the Work
  // On the worker (a callback's all_reduce or barrier): runs queued calls in order until
  // `target` has run.
  void run_queued_until(const CpuAllreduceWork& target);
  void execute(const Job& job);
  void connect(double timeout_s);
  // connect(), or connect_error_ set to why not (with session_mutex_ held): false.
  bool try_connect(double timeout_s);

  c10::intrusive_ptr<c10d::Store> store_;
  const CallRecords records_;  // a copy: the worker may outlive its group (~ProcessGroupStragglar)
  int rank_, size_;
  detail::UcxEngine::NativeAllreduce native_;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  // The most recently queued call (weak: a finished call's tensor is not kept alive).
  c10::weak_intrusive_ptr<CpuAllreduceWork> last_{c10::intrusive_ptr<CpuAllreduceWork>()};
  std::string stop_reason_;

  std::mutex session_mutex_;  // held by the worker while a call runs; report() takes it between calls
  std::unique_ptr<detail::UcxEngine> engine_;
  std::unique_ptr<detail::Session> session_;
  bool ran_ = false;
  std::optional<Error> connect_error_;

  std::thread worker_;  // last: starts after everything it uses exists
};

}  // namespace stragglar::torch_backend
