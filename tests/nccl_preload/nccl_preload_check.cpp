// An unmodified NCCL program (MPI to start the ranks, NCCL + the CUDA runtime, nothing of
// stragglar) shaped like nccl-tests' all_reduce_perf -c 1: ncclAllReduce over sizes, in and
// out of place, every result checked exactly (small integers) against a float64 reference, plus
// calls the preload must pass to NCCL (inside ncclGroupStart/End, int8). Run by
// scripts/gpu-check.sh with and without libstragglar_nccl_preload.so (docs/preload.md "NCCL");
// with `expect-preload` it also checks, through the library's counters, that the large calls
// went through stragglar and the others did not. Without a GPU it exits 77 (skipped), never 0.
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK_CUDA(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define CK_NCCL(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const bool expect_preload = argc > 1 && std::strcmp(argv[1], "expect-preload") == 0;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    // 77: CTest's SKIP_RETURN_CODE; scripts/gpu-check.sh counts it as a failure (it needs a GPU).
    if (rank == 0) std::printf("nccl_preload_check: no CUDA device: skipped\n");
    MPI_Finalize();
    return 77;
  }
  CK_CUDA(cudaSetDevice(rank % devices));
  using Counts = void (*)(long long*, long long*);
  auto counts = reinterpret_cast<Counts>(dlsym(RTLD_DEFAULT, "stragglar_nccl_preload_counts"));
  int failures = 0;
  if (expect_preload != (counts != nullptr)) {
    std::fprintf(stderr, "rank %d: preload %s\n", rank, counts ? "loaded but not expected" : "expected but not loaded");
    failures++;
  }
  ncclUniqueId id;
  if (rank == 0) CK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  CK_NCCL(ncclCommInitRank(&comm, n, id, rank));
  cudaStream_t stream;
  CK_CUDA(cudaStreamCreate(&stream));

  const std::size_t max_count = std::size_t{16} << 20;  // 64 MiB of floats
  float *send = nullptr, *recv = nullptr;
  CK_CUDA(cudaMalloc(&send, max_count * sizeof(float)));
  CK_CUDA(cudaMalloc(&recv, max_count * sizeof(float)));
  std::vector<float> host(max_count), want(max_count);
  for (std::size_t i = 0; i < max_count; ++i) {
    host[i] = static_cast<float>((rank * 3 + static_cast<int>(i % 11)) % 7);
    double sum = 0;
    for (int r = 0; r < n; ++r) sum += (r * 3 + static_cast<int>(i % 11)) % 7;
    want[i] = static_cast<float>(sum);
  }
  long long served_before = 0, passed_before = 0;
  for (std::size_t count = 1024; count <= max_count; count *= 4) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      CK_CUDA(cudaMemcpy(send, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
      float* out = in_place ? send : recv;
      CK_NCCL(ncclAllReduce(send, out, count, ncclFloat32, ncclSum, comm, stream));
      CK_CUDA(cudaStreamSynchronize(stream));
      std::vector<float> got(count);
      CK_CUDA(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < count; ++i) wrong += got[i] != want[i];
      if (wrong) {
        std::fprintf(stderr, "rank %d: count %zu%s: %zu wrong\n", rank, count, in_place ? " in place" : "", wrong);
        failures++;
      }
      if (rank == 0) std::printf("%12zu B %s wrong %zu\n", count * sizeof(float), in_place ? "in place    " : "out of place", wrong);
    }
  }
  if (counts) counts(&served_before, &passed_before);
  // Calls the preload passes to NCCL: inside a group, and a type it does not serve.
  CK_NCCL(ncclGroupStart());
  CK_NCCL(ncclAllReduce(send, recv, max_count, ncclFloat32, ncclSum, comm, stream));
  CK_NCCL(ncclGroupEnd());
  CK_NCCL(ncclAllReduce(send, recv, max_count, ncclInt8, ncclSum, comm, stream));
  CK_CUDA(cudaStreamSynchronize(stream));
  if (counts) {
    long long served = 0, passed = 0;
    counts(&served, &passed);
    if (served != served_before || passed != passed_before + 2) {
      std::fprintf(stderr, "rank %d: group / int8 calls: served %lld -> %lld, passed %lld -> %lld (expected +0, +2)\n",
                   rank, served_before, served, passed_before, passed);
      failures++;
    }
    if (served_before == 0) {
      std::fprintf(stderr, "rank %d: no call went through stragglar (set STRAGGLAR_NCCL_MIN_BYTES=0?)\n", rank);
      failures++;
    }
    if (rank == 0) std::printf("through stragglar: %lld calls, to NCCL: %lld\n", served, passed);
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("nccl_preload_check n=%d %s: %s\n", n, expect_preload ? "expect-preload" : "plain", total ? "FAILED" : "PASSED");
  CK_NCCL(ncclCommDestroy(comm));
  cudaFree(send);
  cudaFree(recv);
  MPI_Finalize();
  return total ? 1 : 0;
}
