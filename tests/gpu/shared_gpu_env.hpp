// More NCCL ranks than GPUs on one machine (through mpi_gpu_place.hpp: the GPU test, stragglar-bench-gpu, bench_nccl_rounds):
// NCCL refuses two ranks of a communicator on one GPU of one host, so every rank is made to look
// like its own host, joined by sockets over loopback (docs/gpu.md "Tests"). Call before NCCL is
// first used; the settings a user gave are kept, except the host id, which must differ per rank.
#pragma once
#include <cstdlib>
#include <string>

namespace stragglar::gpu_test {

inline void share_gpu_over_loopback(const std::string& host_id) {
  setenv("NCCL_HOSTID", host_id.c_str(), 1);
  setenv("NCCL_NET", "Socket", 0);
  setenv("NCCL_P2P_DISABLE", "1", 0);
  setenv("NCCL_SHM_DISABLE", "1", 0);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

}  // namespace stragglar::gpu_test
