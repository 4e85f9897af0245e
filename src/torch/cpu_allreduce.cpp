// CPU tensors: a worker thread per group, the runtime core over UcxEngine (cpu_allreduce.hpp).
#include "cpu_allreduce.hpp"

#include <ATen/core/LegacyTypeDispatch.h>
#include <cxxabi.h>

#include <string>
#include <utility>

#include "tensor_args.hpp"
#include "ucx/kv_store.hpp"

namespace stragglar::torch_backend {
namespace {

// UcxTransport's bootstrap over the group's c10d store (docs/ucx.md "Bootstrap without MPI").
class C10dKeyValueStore final : public KeyValueStore {
 public:
  explicit C10dKeyValueStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, std::span<const std::uint8_t> value) override {
    store_->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  std::vector<std::uint8_t> get(const std::string& key, double timeout_s) override {
    try {
      store_->wait({key}, std::chrono::milliseconds(static_cast<std::int64_t>(timeout_s * 1000)));
    } catch (const c10::Error& e) {
      throw Error(ErrorCode::Timeout, "the c10d store has no key '" + key + "' after " + std::to_string(timeout_s) +
                                          " s (that rank never connected): " + e.what_without_backtrace());
    }
    return store_->get(key);
  }
  bool check(const std::string& key) override { return store_->check({key}); }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace

// ---- CpuAllreduceWork ------------------------------------------------------------------------------
CpuAllreduceWork::CpuAllreduceWork(int rank, at::Tensor tensor, std::uint64_t sequence)
    : c10d::Work(rank, c10d::OpType::ALLREDUCE, "stragglar:all_reduce", std::vector<at::Tensor>{tensor}),
      tensor_(std::move(tensor)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      sequence_(sequence) {}

void CpuAllreduceWork::complete(std::exception_ptr error) {
  // The future first (its callbacks run inline here), then the Work: wait() returning means the
  // future is complete too, as with Gloo.
  std::exception_ptr callback_error;  // a callback that throws must not leave wait() hanging
  try {
    if (error)
      future_->setError(error);
    else
      future_->markCompleted(c10::IValue(std::vector<at::Tensor>{tensor_}));
  } catch (abi::__forced_unwind&) {
    // A Python callback asked for the GIL while the interpreter was finalizing: CPython ends
    // the thread with pthread_exit, an unwind that must go on (swallowed, glibc aborts).
    throw;
  } catch (...) {
    callback_error = std::current_exception();
  }
  finish(error ? error : callback_error);
}

bool CpuAllreduceWork::executed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return executed_;
}

bool CpuAllreduceWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [this] { return completed_; });  // every call ends within its group's timeout
  } else if (!cv_.wait_for(lock, timeout, [this] { return completed_; })) {
    std::rethrow_exception(dist_backend_error("stragglar.torch all_reduce: not complete after " +
                                              std::to_string(timeout.count()) +
                                              " ms (the timeout given to Work.wait); it goes on in the background"));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void CpuAllreduceWork::mark_executed() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    executed_ = true;
  }
  cv_.notify_all();
}

void CpuAllreduceWork::wait_executed() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return executed_; });  // every path marks executed before completing
}

// ---- CpuAllreduce ----------------------------------------------------------------------------------
CpuAllreduce::CpuAllreduce(c10::intrusive_ptr<c10d::Store> store, int rank, int size,
                           detail::UcxEngine::NativeAllreduce native, const CallRecords& records)
    : store_(std::move(store)), records_(records), rank_(rank), size_(size), native_(std::move(native)), worker_([this] { run(); }) {}

CpuAllreduce::~CpuAllreduce() {
  stop("the process group was destroyed");
  // The worker may need the GIL (a Python callback on a future, making the native Gloo).
  run_without_gil([this] {
    if (worker_.joinable()) worker_.join();
  });
}

void CpuAllreduce::stop(const std::string& why) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    if (!stopping_) {
      stopping_ = true;
      stop_reason_ = why;
    }
    dropped.swap(queue_);
  }
  queue_cv_.notify_all();
  for (Job& job : dropped) job.work->mark_executed();  // first: a callback below may drain
  for (Job& job : dropped)
    job.work->complete(dist_backend_error("stragglar.torch all_reduce: not run: " + why));
}

c10::intrusive_ptr<c10d::Work> CpuAllreduce::enqueue(at::Tensor tensor, DataType dtype, ReduceOp op,
                                                     const Options& options, std::chrono::milliseconds timeout,
                                                     std::uint64_t sequence) {
  auto work = c10::make_intrusive<CpuAllreduceWork>(rank_, std::move(tensor), sequence);
  Job job{work, dtype, op, options, static_cast<double>(timeout.count()) / 1000.0};
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    TORCH_CHECK(!stopping_, "stragglar.torch all_reduce: this process group was shut down (", stop_reason_, ")");
    queue_.push_back(std::move(job));
    last_ = work;
  }
  if (on_worker()) {
    // Issued by a future's callback, which runs on this worker (DDP's reducer, comm hooks:
    // torch's PowerSGD hook runs an all_reduce in a callback and waits for it). Left to the
    // worker's loop it would wait behind the callback that waits for it; so the worker runs the
    // queue here, in order, up to it: calls still run in the order this rank issued them (as
    // Gloo matches them), and nothing waits for itself. Each such level nests on the stack.
    run_queued_until(*work);
    return work;
  }
  queue_cv_.notify_one();
  return work;
}

void CpuAllreduce::run_queued_until(const CpuAllreduceWork& target) {
  while (!target.executed()) {
    Job job;
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      if (queue_.empty()) return;  // dropped by stop() (then marked executed) or run by an inner level
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    run_job(job);
  }
}

void CpuAllreduce::drain() {
  c10::intrusive_ptr<CpuAllreduceWork> last;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    last = last_.lock();
  }
  if (!last) return;
  if (on_worker())
    run_queued_until(*last);  // a callback's barrier: the worker cannot wait for itself
  else
    last->wait_executed();  // each call ends within its timeout
}

void CpuAllreduce::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    run_job(job);
  }
}

void CpuAllreduce::run_job(const Job& job) {
  std::exception_ptr error;
  try {
    execute(job);
  } catch (abi::__forced_unwind&) {
    throw;  // the thread is being ended (pthread_exit at interpreter shutdown): see complete()
  } catch (...) {
    // A peer that routed this call elsewhere (to Gloo) is named in the error (call_records.hpp).
    error = records_.explain(job.work->getSequencenumber(),
                             describe_all_reduce({job.work->tensor()}, reduce_op_name(job.op), "stragglar"),
                             current_as_dist_error());
  }
  job.work->mark_executed();
  job.work->complete(error);  // its future's callbacks run here, on the worker (see enqueue)
}

void CpuAllreduce::connect(double timeout_s) {
  C10dKeyValueStore kv(store_);
  UcxOptions options = UcxOptions::from_env(timeout_s);
  options.timeout_source = "the process group's timeout";
  auto transport = UcxTransport::connect(kv, "stragglar_ucx", rank_, size_, options);
  // The native (ProcessGroupStragglar::native_allreduce) stages Gloo's data itself.
  engine_ = std::make_unique<detail::UcxEngine>(std::move(transport), native_,
                                                detail::Engine::BuffersOnError::native_stages);
  session_ = std::make_unique<detail::Session>(*engine_, "stragglar.torch all_reduce", kAfterFailure);
}

bool CpuAllreduce::try_connect(double timeout_s) {
  constexpr const char* kWhy = "stragglar.torch: the CPU engine could not connect: ";
  try {
    connect(timeout_s);
    return true;
  } catch (const Error& e) {
    connect_error_ = Error(e.code(), kWhy + std::string(e.what()));
  } catch (const std::exception& e) {  // the c10d store's own errors (c10::DistStoreError, ...)
    connect_error_ = Error(ErrorCode::SystemError, kWhy + std::string(e.what()));
  }
  return false;
}

void CpuAllreduce::connect_now(double timeout_s) {
  std::lock_guard<std::mutex> lock(session_mutex_);
  if (session_ || connect_error_) return;
  (void)try_connect(timeout_s);  // a failure is kept for the first all_reduce to raise
}

void CpuAllreduce::execute(const Job& job) {
  const at::Tensor& tensor = job.work->tensor();
  std::lock_guard<std::mutex> lock(session_mutex_);
  if (!session_) {
    // A failed connect is final: this rank's address key would have to be published anew, and
    // peers that connected already hold endpoints to the old one.
    if (connect_error_) throw Error(connect_error_->code(), connect_error_->what());
    if (!try_connect(job.timeout_s)) throw *connect_error_;  // final too
  }
  session_->set_timeout(job.timeout_s);  // every wait of the call, the transport's included
  // Raw memory in, raw memory out: no autograd bookkeeping on the user's tensor (as Gloo).
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  // Contiguous tensors (any storage offset) in place: exactly their elements are touched. Others
  // through a packed copy, written back element by element.
  const at::Tensor buffer = tensor.is_contiguous() ? tensor : tensor.contiguous();
  void* data = buffer.numel() == 0 ? nullptr : buffer.data_ptr();
  session_->allreduce(data, data, static_cast<std::size_t>(buffer.numel()), job.dtype, job.op, job.options);
  ran_ = true;
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
}

GroupReport CpuAllreduce::report() {
  std::lock_guard<std::mutex> lock(session_mutex_);
  GroupReport r;
  r.device = "cpu";
  r.ran = ran_;
  if (session_) {
    r.last = session_->last_choice();
    r.automatic = session_->auto_report();
  }
  return r;
}

std::string CpuAllreduce::describe_peer(int peer) {
  std::lock_guard<std::mutex> lock(session_mutex_);
  return engine_ ? engine_->ucx().describe_peer(peer) : std::string();
}

}  // namespace stragglar::torch_backend
