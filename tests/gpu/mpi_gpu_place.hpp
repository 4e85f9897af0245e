// Where each MPI rank runs on its host's GPUs (the GPU test, stragglar-bench-gpu,
// bench_nccl_rounds): every rank learns whether every rank has a GPU to run on (each program says
// itself how it skips or fails), and takes the GPU of its rank on the host, sharing one over
// loopback where the host has more ranks than GPUs (shared_gpu_env.hpp).
#pragma once
#include <mpi.h>

#include <string>

#include "cuda_presence.hpp"
#include "shared_gpu_env.hpp"

namespace stragglar::gpu_test {

struct GpuPlace {
  int worst = 0;  // over every rank: 0 a GPU everywhere, 1 a rank has none (skip), 2 a CUDA error
  int local_rank = 0, local_size = 1;  // this rank on its host
  int device = 0;
  bool shared = false;  // more ranks than GPUs on this host: NCCL over loopback sockets
};

// Collective over MPI_COMM_WORLD. `host_id_prefix` + the rank names this rank's host to NCCL when
// it shares a GPU. Call before NCCL is first used.
inline GpuPlace place_on_gpu(const CudaPresence& gpu, int rank, const std::string& host_id_prefix) {
  GpuPlace p;
  int state = gpu.kind == CudaPresence::present ? 0 : gpu.kind == CudaPresence::absent ? 1 : 2;
  MPI_Allreduce(&state, &p.worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (p.worst != 0) return p;
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &p.local_rank);
  MPI_Comm_size(local, &p.local_size);
  MPI_Comm_free(&local);
  p.shared = p.local_size > gpu.devices;
  if (p.shared) share_gpu_over_loopback(host_id_prefix + std::to_string(rank));
  p.device = p.local_rank % gpu.devices;
  return p;
}

}  // namespace stragglar::gpu_test
