// What each rank called, compared once a call has failed (call_records.hpp).
#include "call_records.hpp"

#include <c10/core/ScalarType.h>

#include <future>
#include <memory>
#include <thread>

#include "tensor_args.hpp"

namespace stragglar::torch_backend {
namespace {

}  // namespace

const char* reduce_op_name(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "sum";
    case c10d::ReduceOp::PRODUCT: return "product";
    case c10d::ReduceOp::MIN: return "min";
    case c10d::ReduceOp::MAX: return "max";
    case c10d::ReduceOp::AVG: return "avg";
    case c10d::ReduceOp::BAND: return "band";
    case c10d::ReduceOp::BOR: return "bor";
    case c10d::ReduceOp::BXOR: return "bxor";
    case c10d::ReduceOp::PREMUL_SUM: return "premul_sum";
    default: return "unknown op";
  }
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::prod: return "product";
    case ReduceOp::min: return "min";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "unknown op";
}

namespace {

std::string message_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

}  // namespace

std::string describe_all_reduce(const std::vector<at::Tensor>& tensors, const char* op, const char* route) {
  std::string s = "all_reduce of ";
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (i > 0) s += ", ";
    s.append(c10::getDtypeNames(t.scalar_type()).first).append("[").append(std::to_string(t.numel())).append("]");
    if (t.layout() != at::kStrided) s.append(" ").append(c10::str(t.layout()));
  }
  s.append(" (").append(op).append(", ");
  s.append(tensors.empty() ? "no tensor" : c10::DeviceTypeName(tensors[0].device().type(), /*lower_case=*/true));
  s.append(") through ").append(route);
  return s;
}

CallRecords::CallRecords(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size) {}

std::string CallRecords::key(std::uint64_t sequence, int rank) const {
  return "failed_calls/" + std::to_string(sequence) + "/" + std::to_string(rank);
}

std::exception_ptr CallRecords::explain(std::uint64_t sequence, const std::string& mine,
                                        std::exception_ptr error) const {
  // The store's calls block up to the store's own timeout (a stopped rank 0 holds a TCPStore's
  // server): asked on a thread of its own, answered within kWaitForPeersS + kStoreGraceS or not
  // at all (the thread then ends when the store answers or times out; it owns what it uses).
  auto answer = std::make_shared<std::promise<std::exception_ptr>>();
  std::future<std::exception_ptr> answered = answer->get_future();
  try {
    std::thread([records = *this, sequence, mine, error, answer] {
      answer->set_value(records.explain_now(sequence, mine, error));
    }).detach();
  } catch (...) {
    return error;  // no thread to be had: the original error says enough
  }
  if (answered.wait_for(std::chrono::duration<double>(kWaitForPeersS + kStoreGraceS)) != std::future_status::ready)
    return error;
  return answered.get();
}

std::exception_ptr CallRecords::explain_now(std::uint64_t sequence, const std::string& mine,
                                            std::exception_ptr error) const {
  try {
    store_->set(key(sequence, rank_), std::vector<std::uint8_t>(mine.begin(), mine.end()));
    std::vector<std::string> others;
    for (int r = 0; r < size_; ++r)
      if (r != rank_) others.push_back(key(sequence, r));
    // Until every peer has written its record, or the wait is over (a peer that is gone never does).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kWaitForPeersS);
    while (!others.empty() && !store_->check(others) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string differ;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || !store_->check({key(sequence, r)})) continue;
      const std::vector<std::uint8_t> v = store_->get(key(sequence, r));
      const std::string theirs(v.begin(), v.end());
      if (theirs != mine) differ += "; rank " + std::to_string(r) + " called " + theirs;
    }
    // The previous call's record goes: a broken group fails every later call at once, and would
    // otherwise leave one key per rank per call in the store (a peer still reading it only loses
    // the explanation, not its error).
    if (sequence > 0) store_->deleteKey(key(sequence - 1, rank_));
    if (differ.empty()) return error;
    return dist_backend_error("stragglar.torch: ranks called collective #" + std::to_string(sequence) +
                              " of this group differently: this rank (" + std::to_string(rank_) + ") called " + mine +
                              differ + " (every rank must pass the same dtype, size, op and device; " +
                              "the tensors stragglar does not serve go to Gloo). This rank's error: " +
                              message_of(error));
  } catch (...) {
    return error;  // the store is gone too: the original error says enough
  }
}

ExplainedWork::ExplainedWork(int rank, c10::intrusive_ptr<c10d::Work> inner, const CallRecords& records,
                             std::uint64_t sequence, std::string mine)
    : c10d::Work(rank, c10d::OpType::ALLREDUCE),
      inner_(std::move(inner)),
      records_(records),
      sequence_(sequence),
      mine_(std::move(mine)) {}

bool ExplainedWork::wait(std::chrono::milliseconds timeout) {
  try {
    return inner_->wait(timeout);
  } catch (...) {
    std::rethrow_exception(records_.explain(sequence_, mine_, std::current_exception()));
  }
}

}  // namespace stragglar::torch_backend
