// GPU tests of stragglarNcclAllReduce / stragglar::nccl_allreduce (one MPI process per rank;
// MPI only bootstraps the ncclUniqueId and compares results across ranks).
//
//   test_nccl_allreduce [correctness|errors|all]   (default all)
//
// correctness: every algorithm (incl. native = ncclAllReduce) × dtype × op × count
//   {0, 1, 7, 13, 1031, 65539} × in/out of place × straggler {0, n-1}; inputs with exactly
//   representable results in every dtype, compared bit for bit with a float64 reference rounded
//   to the dtype (native avg of floating types: NCCL pre-multiplies by 1/n, compared within
//   rounding); then random fp32/fp64/fp16/bf16 sums compared with a float64 reference within
//   a rounding bound; every rank must hold identical bits. A subset runs with the straggler's
//   stream delayed by a GPU sleep kernel (the others' ReduceScatter overlaps it).
// errors: null buffers, ncclFloat8e4m3, a custom op, straggler out of range, an unknown
//   algorithm (all rejected before any data moves) and a count mismatch across ranks.
//
// No GPU: prints "no CUDA device: skipped" and exits 77 (CTest SKIP_RETURN_CODE).
// More ranks than GPUs on a node: every rank gets its own NCCL_HOSTID and the socket
// transport (the recipe of shared/DEVICE.md), set here before NCCL initialises.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "stragglar/nccl.hpp"
#include "runtime/element.hpp"
#include "stragglar/stragglar_nccl.h"

using namespace stragglar;

namespace {

constexpr int kSkip = 77;
int g_rank = 0, g_n = 1;
long g_failures = 0, g_checked = 0, g_unsupported = 0;

void fail(const std::string& what) {
  if (g_failures < 25) std::fprintf(stderr, "[rank %d] FAIL: %s\n", g_rank, what.c_str());
  ++g_failures;
}

#define CK_CUDA(x)                                                                            \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #x, cudaGetErrorString(e_)); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
    }                                                                                         \
  } while (0)
#define CK_NCCL(x)                                                                            \
  do {                                                                                        \
    ncclResult_t r_ = (x);                                                                    \
    if (r_ != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "[rank %d] %s failed: %s\n", g_rank, #x, ncclGetErrorString(r_)); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                           \
    }                                                                                         \
  } while (0)

const std::vector<DataType> kTypes = {DataType::float32, DataType::float64, DataType::float16,
                                      DataType::bfloat16, DataType::int32, DataType::int64};
const std::vector<ReduceOp> kOps = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                    ReduceOp::avg};
const std::vector<int> kAlgos = {stragglar_algo_stragglar, stragglar_algo_ring, stragglar_algo_rhd,
                                 stragglar_algo_allpairs, stragglar_algo_broadcast, stragglar_algo_native};
const char* algo_name(int a) {
  static const char* names[] = {"stragglar", "ring", "rhd", "allpairs", "broadcast", "native"};
  return a >= 0 && a <= 5 ? names[a] : "?";
}
bool is_int(DataType t) { return t == DataType::int32 || t == DataType::int64; }

// ---- host encode/decode of one element ----
void store(std::vector<std::byte>& b, std::size_t i, DataType t, double v) { store_element(b.data(), i, t, v); }
double load(const std::vector<std::byte>& b, std::size_t i, DataType t) { return load_element(b.data(), i, t); }

// Exact inputs: every partial result is a small integer, so any order of reduction gives the
// same, exactly representable value in every dtype (n <= 16).
double exact_input(ReduceOp op, int rank, std::size_t i) {
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return 1.0 + static_cast<double>((i + static_cast<std::size_t>(rank)) % 4);
    case ReduceOp::prod: return 1.0 + static_cast<double>((i + static_cast<std::size_t>(rank)) % 2);
    case ReduceOp::min:
    case ReduceOp::max:
      return static_cast<double>(static_cast<long>((i * 7 + static_cast<std::size_t>(rank) * 3) % 11) - 5);
  }
  return 0;
}

double reference(ReduceOp op, DataType t, std::size_t i, bool random, const std::vector<std::vector<std::byte>>& all) {
  double acc = load(all[0], i, t);
  for (int r = 1; r < g_n; ++r) {
    const double v = load(all[static_cast<std::size_t>(r)], i, t);
    switch (op) {
      case ReduceOp::sum: case ReduceOp::avg: acc += v; break;
      case ReduceOp::prod: acc *= v; break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::max: acc = std::max(acc, v); break;
    }
  }
  (void)random;
  if (op == ReduceOp::avg) acc = is_int(t) ? std::trunc(acc / g_n) : acc / g_n;
  return acc;
}

std::uint64_t fnv1a(const std::vector<std::byte>& b) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::byte x : b) h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
  return h;
}

struct Ctx {
  ncclComm_t comm;
  cudaStream_t stream;
  void* send;
  void* recv;
  std::size_t capacity;  // bytes of each buffer
};

// One case. Returns false (on every rank alike) when the algorithm does not support n.
bool run_case(Ctx& c, int algo, DataType t, ReduceOp op, std::size_t count, bool in_place,
              int straggler, bool random, long long delay_ns) {
  const std::size_t es = size_of(t);
  const std::size_t bytes = count * es;
  // Inputs of every rank (each rank computes all of them: the reference needs them).
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(g_n), std::vector<std::byte>(bytes));
  for (int r = 0; r < g_n; ++r) {
    std::mt19937_64 rng(0x5eedull * 1315423911ull + static_cast<unsigned>(r) * 977u + count);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (std::size_t i = 0; i < count; ++i)
      store(all[static_cast<std::size_t>(r)], i, t, random ? u(rng) : exact_input(op, r, i));
  }
  const auto& mine = all[static_cast<std::size_t>(g_rank)];
  void* src = in_place ? c.recv : c.send;
  if (bytes > 0) CK_CUDA(cudaMemcpy(src, mine.data(), bytes, cudaMemcpyHostToDevice));
  if (!in_place && bytes > 0) CK_CUDA(cudaMemset(c.recv, 0xAB, bytes));
  if (g_rank == straggler && delay_ns > 0) cuda::launch_sleep(c.stream, delay_ns);

  stragglar_options o;
  stragglar_options_init(&o);
  o.algorithm = static_cast<stragglar_algorithm>(algo);
  o.straggler = straggler;
  const stragglar_result res = stragglarNcclAllReduce(src, c.recv, count, to_nccl(t), to_nccl(op), c.comm, c.stream, &o);
  // An n the algorithm does not support is rejected identically on every rank.
  int unsupported = res == stragglar_invalid_usage ? 1 : 0, any = 0;
  MPI_Allreduce(&unsupported, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  const std::string what = std::string(algo_name(algo)) + " " + to_string(t) + " " + to_string(op) +
                           " count=" + std::to_string(count) + (in_place ? " in-place" : " out-of-place") +
                           " straggler=" + std::to_string(straggler) + (random ? " random" : " exact");
  if (any) {
    if (!unsupported) fail(what + ": rejected on another rank but not here");
    return false;
  }
  if (res != stragglar_success) {
    fail(what + ": " + stragglar_result_string(res) + ": " + stragglar_last_error());
    return true;
  }
  CK_CUDA(cudaStreamSynchronize(c.stream));
  std::vector<std::byte> out(bytes);
  if (bytes > 0) CK_CUDA(cudaMemcpy(out.data(), c.recv, bytes, cudaMemcpyDeviceToHost));

  // Element-wise against the float64 reference rounded to the dtype.
  const bool loose = random || (algo == stragglar_algo_native && op == ReduceOp::avg && !is_int(t));
  const double u = t == DataType::float16 ? 0x1p-11 : t == DataType::bfloat16 ? 0x1p-8
                 : t == DataType::float32 ? 0x1p-24 : t == DataType::float64 ? 0x1p-53 : 0.0;
  std::vector<std::byte> expect(bytes);
  long bad = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double ref = reference(op, t, i, random, all);
    store(expect, i, t, ref);
    if (!loose) {
      if (std::memcmp(out.data() + i * es, expect.data() + i * es, es) != 0) {
        if (bad++ < 3) fail(what + ": element " + std::to_string(i) + " = " + std::to_string(load(out, i, t)) +
                            ", expected " + std::to_string(load(expect, i, t)));
      }
    } else {
      double mag = 0;
      for (int r = 0; r < g_n; ++r) mag += std::fabs(load(all[static_cast<std::size_t>(r)], i, t));
      const double tol = (2.0 * g_n + 2.0) * u * std::max(mag, std::fabs(ref)) + 1e-300;
      if (!(std::fabs(load(out, i, t) - ref) <= tol)) {
        if (bad++ < 3) fail(what + ": element " + std::to_string(i) + " = " + std::to_string(load(out, i, t)) +
                            ", expected " + std::to_string(ref) + " ± " + std::to_string(tol));
      }
    }
  }
  if (bad > 3) fail(what + ": " + std::to_string(bad) + " wrong elements in all");
  // Identical bits on every rank.
  const std::uint64_t h = fnv1a(out);
  std::uint64_t lo = 0, hi = 0;
  MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  if (lo != hi) fail(what + ": results differ across ranks");
  ++g_checked;
  return true;
}

void correctness(Ctx& c) {
  const std::vector<std::size_t> counts = {0, 1, 7, 13, 1031, 65539};
  const std::vector<int> stragglers = g_n > 1 ? std::vector<int>{0, g_n - 1} : std::vector<int>{0};
  for (int algo : kAlgos) {
    bool supported = true;
    for (DataType t : kTypes)
      for (ReduceOp op : kOps)
        for (std::size_t count : counts)
          for (int in_place = 0; in_place < 2 && supported; ++in_place)
            for (int s : stragglers)
              if (supported) supported = run_case(c, algo, t, op, count, in_place != 0, s, false, 0);
    if (!supported) {
      ++g_unsupported;
      if (g_rank == 0) std::printf("  %-9s n=%d: not supported by the synthesizer (rejected on every rank)\n", algo_name(algo), g_n);
      continue;
    }
    // Random float sums (rounding bound, identical bits) and a delayed straggler.
    for (DataType t : {DataType::float32, DataType::float64, DataType::float16, DataType::bfloat16})
      run_case(c, algo, t, ReduceOp::sum, 65539, false, g_n - 1, true, 0);
    run_case(c, algo, DataType::float32, ReduceOp::sum, 65539, true, g_n - 1, false, 2'000'000);
    run_case(c, algo, DataType::bfloat16, ReduceOp::max, 1031, false, 0, false, 1'000'000);
    if (g_rank == 0) std::printf("  %-9s n=%d: done\n", algo_name(algo), g_n);
    std::fflush(stdout);
  }
}

void expect_result(stragglar_result got, stragglar_result want, const char* what, const char* needle) {
  if (got != want) {
    fail(std::string(what) + ": got " + stragglar_result_string(got) + ", expected " + stragglar_result_string(want));
    return;
  }
  const std::string msg = stragglar_last_error();
  // The message reaches stragglar_last_error() once the shared C boundary exports its setter.
  if (!msg.empty() && needle != nullptr && msg.find(needle) == std::string::npos)
    fail(std::string(what) + ": message '" + msg + "' does not name '" + needle + "'");
  ++g_checked;
}

void errors(Ctx& c) {
  stragglar_options o;
  stragglar_options_init(&o);
  expect_result(stragglarNcclAllReduce(nullptr, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "null sendbuff", "sendbuf");
  expect_result(stragglarNcclAllReduce(c.send, nullptr, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "null recvbuff", "recvbuf");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat8e4m3, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "ncclFloat8e4m3", "ncclFloat8e4m3");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclUint8, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "ncclUint8", "ncclUint8");
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, static_cast<ncclRedOp_t>(ncclNumOps), c.comm, c.stream, &o),
                stragglar_invalid_usage, "custom op", "ncclRedOp_t");
  o.straggler = g_n;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "straggler n", std::to_string(g_n).c_str());
  o.straggler = -2;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "straggler -2", "-2");
  stragglar_options_init(&o);
  const int bogus_algorithm = 42;  // not a stragglar_algorithm value
  std::memcpy(&o.algorithm, &bogus_algorithm, sizeof bogus_algorithm);
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "algorithm 42", "42");
  stragglar_options_init(&o);
  o.pipeline = -1;
  expect_result(stragglarNcclAllReduce(c.send, c.recv, 8, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                stragglar_invalid_usage, "pipeline -1", "-1");
  // C++ API: the same checks throw Error(InvalidUsage).
  try {
    nccl_allreduce(c.send, nullptr, 3, DataType::float32, ReduceOp::sum, c.comm, c.stream);
    fail("C++ null recvbuf: no exception");
  } catch (const Error& e) {
    if (e.code() != ErrorCode::InvalidUsage) fail(std::string("C++ null recvbuf: ") + to_string(e.code()));
    ++g_checked;
  }
  // A mismatch across ranks: rank 0 passes another count. Every rank must report it.
  if (g_n > 1) {
    stragglar_options_init(&o);
    const std::size_t count = g_rank == 0 ? 100 : 101;
    expect_result(stragglarNcclAllReduce(c.send, c.recv, count, ncclFloat32, ncclSum, c.comm, c.stream, &o),
                  stragglar_mismatch, "count mismatch", "count");
    CK_CUDA(cudaStreamSynchronize(c.stream));
  }
  // The communicator still works afterwards.
  run_case(c, stragglar_algo_stragglar, DataType::float32, ReduceOp::sum, 1031, true, g_n - 1, false, 0);
}

void shared_gpu_env(int local_size, int ngpus) {
  if (local_size <= ngpus) return;
  // More ranks than GPUs here: make every rank look like its own host (shared/DEVICE.md).
  const std::string host = "stragglar-test-host" + std::to_string(g_rank);
  setenv("NCCL_HOSTID", host.c_str(), 1);
  setenv("NCCL_NET", "Socket", 0);
  setenv("NCCL_P2P_DISABLE", "1", 0);
  setenv("NCCL_SHM_DISABLE", "1", 0);
  setenv("NCCL_SOCKET_IFNAME", "lo", 0);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_n);
  const std::string mode = argc > 1 ? argv[1] : "all";

  int ngpus = 0;
  const cudaError_t e = cudaGetDeviceCount(&ngpus);
  int have = (e == cudaSuccess && ngpus > 0) ? 1 : 0, all_have = 0;
  MPI_Allreduce(&have, &all_have, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (!all_have) {
    if (g_rank == 0)
      std::printf("no CUDA device: skipped (%s)\n", e == cudaSuccess ? "0 devices" : cudaGetErrorString(e));
    MPI_Finalize();
    return kSkip;
  }
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  shared_gpu_env(local_size, ngpus);
  CK_CUDA(cudaSetDevice(local_rank % ngpus));

  ncclUniqueId id;
  if (g_rank == 0) CK_NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  Ctx c{};
  CK_NCCL(ncclCommInitRank(&c.comm, g_n, id, g_rank));
  CK_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  c.capacity = 65539 * 8;
  CK_CUDA(cudaMalloc(&c.send, c.capacity));
  CK_CUDA(cudaMalloc(&c.recv, c.capacity));
  if (g_rank == 0)
    std::printf("test_nccl_allreduce: %d ranks, %d GPU(s) per node, %d ranks per node%s\n", g_n, ngpus,
                local_size, local_size > ngpus ? " (shared GPU: NCCL over loopback sockets)" : "");

  if (mode == "correctness" || mode == "all") correctness(c);
  if (mode == "errors" || mode == "all") errors(c);

  CK_CUDA(cudaStreamSynchronize(c.stream));
  if (stragglarNcclCommRelease(c.comm) != stragglar_success) fail("stragglarNcclCommRelease");
  CK_CUDA(cudaFree(c.send));
  CK_CUDA(cudaFree(c.recv));
  CK_NCCL(ncclCommDestroy(c.comm));
  CK_CUDA(cudaStreamDestroy(c.stream));

  long failures = 0, checked = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&g_checked, &checked, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (g_rank == 0)
    std::printf("test_nccl_allreduce n=%d: %ld checks, %ld failures, %ld algorithm(s) unsupported at this n: %s\n",
                g_n, checked, failures, g_unsupported, failures == 0 ? "PASSED" : "FAILED");
  MPI_Comm_free(&local);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
