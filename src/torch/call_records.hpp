// What each rank called, compared once a call has failed (docs/reliability.md).
//
// all_reduce is routed per call: the tensors the core serves go to stragglar, the rest (int8,
// sparse, several tensors, unsupported ops) to the inner Gloo. A call whose ranks route it
// differently — one rank's int8 tensor to Gloo while the others' float32 go to stragglar — waits in
// two collectives that never meet, and each side could only report its own timeout. Checking every
// call's arguments across ranks would cost an exchange per call; instead a rank whose call failed
// publishes what it called, under the call's sequence number, in the group's store (its keys are
// the group instance's: python/stragglar/torch/__init__.py), and reads what the others published
// for a short while. A difference becomes the error on every rank that sees it; nothing is
// published or read while calls succeed.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

#include "stragglar/types.hpp"

namespace stragglar::torch_backend {

// "all_reduce of float32[1024] (sum, cpu) through stragglar": what a rank's call was, as its
// peers will read it. The device's type only: ranks on cuda:0 and cuda:1 called alike.
std::string describe_all_reduce(const std::vector<at::Tensor>& tensors, const char* op, const char* route);
// One name per op, whichever side of the routing it was seen on.
const char* reduce_op_name(const c10d::ReduceOp& op);
const char* reduce_op_name(ReduceOp op);

class CallRecords {
 public:
  // How long a failed call waits for its peers' records: they fail at about the same time (the
  // same timeout), and a peer that is gone never writes one.
  static constexpr double kWaitForPeersS = 0.5;
  // And how much longer the store may take to answer before the error goes out unexplained.
  static constexpr double kStoreGraceS = 0.25;

  CallRecords(c10::intrusive_ptr<c10d::Store> store, int rank, int size);

  // After call `sequence` failed with `error` on this rank: publishes `mine`, reads the other
  // ranks' records of that call (waiting at most kWaitForPeersS for them) and returns `error` with
  // the ranks whose call differed named first, or `error` itself when none differed, none
  // answered, or the store did not answer within kWaitForPeersS + kStoreGraceS. Never throws.
  std::exception_ptr explain(std::uint64_t sequence, const std::string& mine, std::exception_ptr error) const;

 private:
  std::string key(std::uint64_t sequence, int rank) const;
  std::exception_ptr explain_now(std::uint64_t sequence, const std::string& mine, std::exception_ptr error) const;

  c10::intrusive_ptr<c10d::Store> store_;
  int rank_, size_;
};

// A Gloo all_reduce's Work whose failure in wait() is explained by CallRecords; every other
// query goes to Gloo's Work unchanged (its future carries Gloo's own error).
class ExplainedWork final : public c10d::Work {
 public:
  ExplainedWork(int rank, c10::intrusive_ptr<c10d::Work> inner, const CallRecords& records, std::uint64_t sequence,
                std::string mine);
  bool isCompleted() override { return inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  int sourceRank() const override { return inner_->sourceRank(); }
  std::vector<at::Tensor> result() override { return inner_->result(); }
  void synchronize() override { inner_->synchronize(); }
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override { inner_->abort(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return inner_->getFuture(); }
  float getDuration() const override { return inner_->getDuration(); }
  uint64_t getSequencenumber() const override { return inner_->getSequencenumber(); }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  CallRecords records_;  // a copy (a store pointer and two ints): a Work may outlive its group
  std::uint64_t sequence_;
  std::string mine_;
};

}  // namespace stragglar::torch_backend
