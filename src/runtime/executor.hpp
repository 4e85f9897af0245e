// Executor: runs one rank's Plan over a Transport and a Device (docs/runtime.md "Executor").
//
// Per round: post every receive (into scratch when the data is to be reduced, or into the
// buffer for a plain copy), post every send, wait (Transport::exchange), then reduce/copy
// from scratch. No barrier: ranks only synchronise pairwise through their messages. A rank
// simply has no rounds in phases it does not take part in, so the straggler skips StragglAR's
// ReduceScatter and the others start it as soon as they enter.
//
// The executor never touches buffer memory itself (only through Device), so the same code
// drives host buffers with MpiTransport + CpuDevice and GPU buffers with NCCL + CUDA streams.
// It does not allocate on the hot path once its message lists have grown to the plan's size.
#pragma once
#include <cstddef>
#include <vector>

#include "stragglar/plan.hpp"
#include "runtime/device.hpp"
#include "runtime/transport.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

// Which part of the schedule to run. `all` is the collective; the split lets a benchmark time
// the ideal case (paper §4: straggler arrives after the others finished the no-wait phases):
// run no_wait_only, synchronise, then time waiting_only.
enum class PhaseSelection { all, no_wait_only, waiting_only };

class Executor {
 public:
  Executor(Transport& transport, Device& device) : transport_(transport), device_(device) {}

  // Scratch bytes run() needs for this plan and count (0 when nothing is staged).
  static std::size_t scratch_bytes(const Plan& plan, std::size_t count, DataType t);

  // In-place AllReduce of buf[0, count) following `plan`. `scratch` holds at least
  // scratch_bytes(plan, count, t) bytes in the device's memory. ReduceOp::avg reduces as sum
  // and divides at the end (only when `phases` includes the last phase: all or waiting_only).
  // Errors from the transport are rethrown with the phase, round and rank prepended.
  void run(const Plan& plan, void* buf, std::size_t count, DataType t, ReduceOp op,
           void* scratch, std::size_t scratch_size, PhaseSelection phases = PhaseSelection::all);

 private:
  struct StagedRecv {
    std::byte* dst;
    const std::byte* src;
    std::size_t count;
    TransferOp op;
  };
  Transport& transport_;
  Device& device_;
  std::vector<Message> sends_;
  std::vector<Message> recvs_;
  std::vector<StagedRecv> staged_;
};

}  // namespace stragglar
