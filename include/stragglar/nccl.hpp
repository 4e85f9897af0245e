// stragglar over NCCL — the C++ API (C: stragglar_nccl.h) and the two GPU runtime pieces.
//
//   stragglar::NcclOptions opts;        // StragglAR, straggler n-1, pipeline auto
//   opts.straggler = 7;
//   stragglar::nccl_allreduce(sendbuf, recvbuf, count, DataType::float32, ReduceOp::sum,
//                             comm, stream, opts);   // enqueued on `stream`, returns at once
//
// Every algorithm runs the one path of the CPU runtime: synthesize → verify (once, when the
// plan enters the per-communicator cache) → compile for this rank → Executor, here over
// NcclTransport (ncclSend/ncclRecv inside one ncclGroupStart/End per round) and CudaDevice
// (reduction kernels on the same stream). Nothing waits on the host: the straggler's stream
// simply reaches its calls later, and the others' ReduceScatter runs meanwhile (paper §3).
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <optional>

#include "stragglar/cost_model.hpp"
#include "stragglar/error.hpp"
#include "stragglar/executor.hpp"
#include "stragglar/runtime/device.hpp"
#include "stragglar/runtime/transport.hpp"
#include "stragglar/synthesize.hpp"
#include "stragglar/types.hpp"

namespace stragglar {

// Transport over NCCL point-to-point on one communicator and stream. exchange() enqueues one
// ncclGroupStart(); ncclRecv...; ncclSend...; ncclGroupEnd() on the stream and returns: no
// host synchronisation, no allocation. Zero-byte messages are skipped on both sides.
class NcclTransport final : public Transport {
 public:
  NcclTransport(ncclComm_t comm, cudaStream_t stream);  // queries rank and size of comm
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  void exchange(std::span<const Message> sends, std::span<const Message> recvs) override;

  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }
  cudaStream_t stream() const noexcept { return stream_; }
  ncclComm_t comm() const noexcept { return comm_; }

 private:
  ncclComm_t comm_;
  cudaStream_t stream_;
  int rank_ = 0;
  int nranks_ = 0;
};

// Device memory and kernels on one CUDA device and stream. allocate/deallocate are
// stream-ordered (cudaMallocAsync/cudaFreeAsync from the device's default pool); copy is
// cudaMemcpyAsync device-to-device; reduce and finish_average launch kernels (16-byte vector
// loads where dst and src share their alignment, scalar otherwise). Nothing synchronises.
class CudaDevice final : public Device {
 public:
  // `device` = -1: the current device. Queries the SM count once (it sizes the grids).
  explicit CudaDevice(cudaStream_t stream, int device = -1);
  void* allocate(std::size_t bytes) override;
  void deallocate(void* p) noexcept override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void reduce(void* dst, const void* src, std::size_t count, DataType t, ReduceOp op) override;
  void finish_average(void* buf, std::size_t count, DataType t, int nranks) override;

  void set_stream(cudaStream_t stream) noexcept { stream_ = stream; }
  cudaStream_t stream() const noexcept { return stream_; }
  int device() const noexcept { return device_; }
  int max_blocks() const noexcept { return max_blocks_; }

 private:
  cudaStream_t stream_;
  int device_ = 0;
  int max_blocks_ = 1;
};

struct NcclOptions {
  Algorithm algorithm = Algorithm::stragglar;
  bool native = false;            // true: ncclAllReduce; the other fields are only checked
  int straggler = -1;             // the rank expected last; -1 = n-1
  int pipeline = kPipelineAuto;   // StragglAR chunks per rank K; kPipelineAuto = cost model
  // Cost model for pipeline == kPipelineAuto; nullopt = the environment (STRAGGLAR_ALPHA_US,
  // STRAGGLAR_BANDWIDTH_GBPS) when set, else CostModel{}.
  std::optional<CostModel> cost;
  // Benchmarks only (ideal-case timing): run part of the schedule; waiting_only continues an
  // earlier no_wait_only call on recvbuf (sendbuf is not read again).
  PhaseSelection phases = PhaseSelection::all;
};

// AllReduce of `count` elements of device memory across `comm`, enqueued on `stream`.
// In place when sendbuf == recvbuf. Collective: every rank passes the same count, dtype, op
// and options; the first call of a configuration on a communicator checks that (a small
// ncclAllReduce and one stream synchronisation) and throws Error(Mismatch) on every rank.
// Bad arguments throw Error(InvalidUsage) before anything is enqueued; CUDA/NCCL failures
// throw Error(SystemError) naming the call. Not thread-safe per communicator.
void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                    ReduceOp op, ncclComm_t comm, cudaStream_t stream, const NcclOptions& opts = {});

// Drops the cached state of `comm` (call before ncclCommDestroy). No-op for an unknown comm.
void nccl_comm_release(ncclComm_t comm);

// NCCL ⟷ stragglar types. from_nccl throws Error(InvalidUsage) naming an unsupported value
// (e.g. ncclFloat8e4m3, ncclUint8, a ncclRedOpCreatePreMulSum op).
DataType from_nccl(ncclDataType_t t);
ReduceOp from_nccl(ncclRedOp_t op);
ncclDataType_t to_nccl(DataType t) noexcept;
ncclRedOp_t to_nccl(ReduceOp op) noexcept;

}  // namespace stragglar
