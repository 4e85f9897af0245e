// algorithm = auto: the session's side of one call (AutoHost, auto_runner.hpp; docs/auto.md "In
// the runtime core"). The runner decides; this gives it plans from the plan cache with the
// session's scratch sized for them, runs a choice on the call's buffers with the
// configuration's tag (native in its bounded form), and warms native up on memory made with the
// configuration. One per call (and one at a configuration's creation, which only builds plans);
// it lives on the stack: no allocation per call.
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/auto_runner.hpp"
#include "runtime/device.hpp"
#include "runtime/first_call_trace.hpp"
#include "stragglar/types.hpp"

namespace stragglar::detail {

class Session;

// Memory of their own for auto's warm-ups of native (AutoHost::warm_up_native) at a
// configuration's first call, where nothing else fits: in place without the session's kept copy
// (the other calls warm up on their recvbuf or the kept copy). It is made with the
// configuration, before the argument agreement, so that the agreement tells every rank whether
// every rank has it: then all warm up or none does (a rank that skipped them would pair its
// next collectives with its peers' warm-ups). Freed after that first call; after a failed
// warm-up it is left to the engine instead (a native that timed out may still write it).
class WarmUpMemory {
 public:
  WarmUpMemory() = default;
  ~WarmUpMemory() { release(); }
  WarmUpMemory(const WarmUpMemory&) = delete;
  WarmUpMemory& operator=(const WarmUpMemory&) = delete;

  // `bytes` on `device`; false, holding nothing, when the device has no memory to spare (a GPU
  // near full).
  bool allocate(Device& device, std::size_t bytes);
  void release() noexcept;
  // Forgets the memory without freeing it (a warm-up that raised).
  void abandon() noexcept { memory_ = nullptr; }
  void* get() const noexcept { return memory_; }
  std::size_t size() const noexcept { return bytes_; }

 private:
  Device* device_ = nullptr;
  void* memory_ = nullptr;
  std::size_t bytes_ = 0;
};

class AutoCall final : public AutoHost {
 public:
  // The buffers of this call; a configuration's creation passes none (it only builds plans).
  // `trace`: the first call's step times (STRAGGLAR_DEBUG=TRACE), or null.
  AutoCall(Session& s, const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype, ReduceOp op,
           int tag = 0, FirstCallTrace* trace = nullptr)
      : s_(s), sendbuf_(sendbuf), recvbuf_(recvbuf), count_(count), dtype_(dtype), op_(op), tag_(tag), trace_(trace) {}
  std::shared_ptr<const Plan> plan(const Choice& c, const Options& base, std::size_t count, DataType dtype) override;
  void run(const Choice& c, const Plan* plan) override;
  // The measured call's shape, untimed, on memory the caller does not read afterwards; on no
  // rank unless the configuration's agreement found every rank able to.
  void warm_up_native(int runs) override;

 private:
  Session& s_;
  const void* sendbuf_;
  void* recvbuf_;
  std::size_t count_;
  DataType dtype_;
  ReduceOp op_;
  int tag_;
  FirstCallTrace* trace_;
};

}  // namespace stragglar::detail
