// stragglar::nccl_allreduce: validation, the per-communicator cache, the one-time agreement
// check, then the generic Executor over NcclTransport + CudaDevice (or ncclAllReduce).
//
// Hot path (a configuration seen before): one map lookup under a mutex, then the executor
// enqueues the plan's rounds on the stream. No host synchronisation, no allocation (scratch
// grows only at a configuration's first use), no synthesis.
#include <array>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>

#include "cuda_check.hpp"
#include "stragglar/nccl.hpp"
#include "stragglar/plan.hpp"
#include "stragglar/runtime/env.hpp"
#include "stragglar/verify.hpp"

namespace stragglar {
namespace {

constexpr int kNativeCode = 5;  // stragglar_algo_native

// Everything every rank must agree on; also the cache key of a configuration.
struct ConfigKey {
  std::uint64_t count;
  int dtype;
  int op;
  int algo;       // Algorithm value, or kNativeCode
  int straggler;  // resolved: never -1
  int pipeline;   // resolved K (1 for all but StragglAR)
  int phases;
  bool operator==(const ConfigKey&) const = default;
  std::array<std::int64_t, 7> fields() const {
    return {static_cast<std::int64_t>(count), dtype, op, algo, straggler, pipeline, phases};
  }
};
constexpr std::array<const char*, 7> kFieldNames = {"count", "datatype", "op", "algorithm",
                                                    "straggler", "pipeline", "phases"};

struct ConfigKeyHash {
  std::size_t operator()(const ConfigKey& k) const noexcept {
    std::size_t h = std::hash<std::uint64_t>{}(k.count);
    for (std::int64_t f : {std::int64_t{k.dtype}, std::int64_t{k.op}, std::int64_t{k.algo},
                           std::int64_t{k.straggler}, std::int64_t{k.pipeline},
                           std::int64_t{k.phases}})
      h = h * 1000003u ^ std::hash<std::int64_t>{}(f);
    return h;
  }
};

struct Config {
  const Plan* plan = nullptr;  // nullptr for native and for a single rank
};

// Restores the caller's current device on scope exit.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    STRAGGLAR_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) STRAGGLAR_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() {
    int now = previous_;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

struct CommState {
  ncclComm_t comm;
  int device = 0;
  NcclTransport transport;
  CudaDevice dev;
  Executor exec;
  std::map<std::tuple<int, int, int>, std::unique_ptr<Plan>> plans;  // (algo, straggler, K)
  std::unordered_map<ConfigKey, Config, ConfigKeyHash> configs;
  void* scratch = nullptr;
  std::size_t scratch_size = 0;
  std::int64_t* signature = nullptr;  // 14 int64 on the device, for the agreement check
  cudaStream_t last_stream = nullptr;
  bool have_last_stream = false;
  cudaEvent_t handoff = nullptr;  // orders calls on different streams (shared scratch)

  CommState(ncclComm_t c, int cuda_device)
      : comm(c), device(cuda_device), transport(c, nullptr), dev(nullptr, cuda_device),
        exec(transport, dev) {
    STRAGGLAR_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&signature), 14 * sizeof(std::int64_t)));
    STRAGGLAR_CUDA_CHECK(cudaEventCreateWithFlags(&handoff, cudaEventDisableTiming));
  }
  ~CommState() {
    // cudaFree waits for pending work that may still use these buffers.
    if (scratch != nullptr) (void)cudaFree(scratch);
    if (signature != nullptr) (void)cudaFree(signature);
    if (handoff != nullptr) (void)cudaEventDestroy(handoff);
  }
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  // Calls may come on different streams: the new stream waits for the old one's last call
  // (they share scratch). Stream-ordered, no host wait.
  void use_stream(cudaStream_t stream) {
    if (have_last_stream && stream != last_stream) {
      STRAGGLAR_CUDA_CHECK(cudaEventRecord(handoff, last_stream));
      STRAGGLAR_CUDA_CHECK(cudaStreamWaitEvent(stream, handoff, 0));
    }
    last_stream = stream;
    have_last_stream = true;
    transport.set_stream(stream);
    dev.set_stream(stream);
  }

  void ensure_scratch(std::size_t bytes) {
    if (bytes <= scratch_size) return;
    if (scratch != nullptr) {
      STRAGGLAR_CUDA_CHECK(cudaFree(scratch));  // synchronises: first use of a configuration only
      scratch = nullptr;
      scratch_size = 0;
    }
    STRAGGLAR_CUDA_CHECK(cudaMalloc(&scratch, bytes));
    scratch_size = bytes;
  }

  const Plan* plan_for(Algorithm algo, int straggler, int k, std::size_t bytes, const CostModel& cost) {
    auto key = std::make_tuple(static_cast<int>(algo), straggler, k);
    auto it = plans.find(key);
    if (it != plans.end()) return it->second.get();
    SynthOptions so;
    so.straggler = straggler;
    so.pipeline = k;
    so.bytes = bytes;
    so.cost = cost;
    const Schedule s = synthesize(algo, transport.nranks(), so);
    if (env().verify) verify_or_throw(s);
    auto plan = std::make_unique<Plan>(compile(s, transport.rank()));
    if (env().debug_info && transport.rank() == 0)
      std::fprintf(stderr, "stragglar: NCCL plan %s n=%d straggler=%d K=%d: %d rounds (%d wait for the straggler)\n",
                   to_string(algo), transport.nranks(), straggler, k, s.total_rounds(), s.waiting_rounds());
    return plans.emplace(key, std::move(plan)).first->second.get();
  }

  // Every rank must pass the same ConfigKey: one ncclAllReduce(min) of (v, -v) gives the
  // minimum and maximum of every field across ranks. Once per configuration.
  void check_agreement(const ConfigKey& key, cudaStream_t stream) {
    const auto v = key.fields();
    std::array<std::int64_t, 14> host{};
    for (std::size_t i = 0; i < v.size(); ++i) {
      host[i] = v[i];
      host[i + 7] = -v[i];
    }
    STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(signature, host.data(), sizeof(host), cudaMemcpyHostToDevice, stream));
    STRAGGLAR_NCCL_CHECK(ncclAllReduce(signature, signature, 14, ncclInt64, ncclMin, comm, stream));
    STRAGGLAR_CUDA_CHECK(cudaMemcpyAsync(host.data(), signature, sizeof(host), cudaMemcpyDeviceToHost, stream));
    STRAGGLAR_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::int64_t lo = host[i], hi = -host[i + 7];
      if (lo != v[i] || hi != v[i])
        throw Error(ErrorCode::Mismatch,
                    std::string("stragglarNcclAllReduce: ranks disagree on the ") + kFieldNames[i] +
                        ": rank " + std::to_string(transport.rank()) + " passed " + std::to_string(v[i]) +
                        ", values across ranks range over [" + std::to_string(lo) + ", " +
                        std::to_string(hi) + "]");
    }
  }
};

std::mutex g_mutex;
std::unordered_map<ncclComm_t, std::unique_ptr<CommState>>& states() {
  static auto* m = new std::unordered_map<ncclComm_t, std::unique_ptr<CommState>>();  // never destroyed: no CUDA calls at exit
  return *m;
}

CommState& state_for(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto& m = states();
  auto it = m.find(comm);
  if (it != m.end()) return *it->second;
  int device = 0;
  STRAGGLAR_NCCL_CHECK(ncclCommCuDevice(comm, &device));
  DeviceGuard guard(device);
  return *m.emplace(comm, std::make_unique<CommState>(comm, device)).first->second;
}

bool valid(DataType t) {
  switch (t) {
    case DataType::float32: case DataType::float64: case DataType::float16:
    case DataType::bfloat16: case DataType::int32: case DataType::int64: return true;
  }
  return false;
}
bool valid(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: case ReduceOp::prod: case ReduceOp::min: case ReduceOp::max:
    case ReduceOp::avg: return true;
  }
  return false;
}
bool valid(Algorithm a) {
  for (Algorithm x : scheduled_algorithms())
    if (x == a) return true;
  return false;
}

}  // namespace

void nccl_allreduce(const void* sendbuf, void* recvbuf, std::size_t count, DataType dtype,
                    ReduceOp op, ncclComm_t comm, cudaStream_t stream, const NcclOptions& opts) {
  // ---- arguments, before anything is enqueued ----
  require(comm != nullptr, "nccl_allreduce: comm is a null ncclComm_t");
  require(count == 0 || sendbuf != nullptr, "nccl_allreduce: sendbuf is null with count " + std::to_string(count));
  require(count == 0 || recvbuf != nullptr, "nccl_allreduce: recvbuf is null with count " + std::to_string(count));
  require(valid(dtype), "nccl_allreduce: unknown DataType " + std::to_string(static_cast<int>(dtype)));
  require(valid(op), "nccl_allreduce: unknown ReduceOp " + std::to_string(static_cast<int>(op)));
  require(opts.native || valid(opts.algorithm),
          "nccl_allreduce: unknown algorithm " + std::to_string(static_cast<int>(opts.algorithm)));
  require(opts.pipeline >= 0, "nccl_allreduce: pipeline " + std::to_string(opts.pipeline) +
                                  ", expected >= 1 or 0 (auto)");
  require(!(opts.native && opts.phases != PhaseSelection::all),
          "nccl_allreduce: native (ncclAllReduce) cannot run part of a schedule (phases must be all)");

  CommState& st = state_for(comm);
  const int n = st.transport.nranks();
  require(opts.straggler >= -1 && opts.straggler < n,
          "nccl_allreduce: straggler " + std::to_string(opts.straggler) + ", expected a rank in [0, " +
              std::to_string(n) + ") or -1 (= n-1)");
  const int straggler = opts.straggler < 0 ? n - 1 : opts.straggler;
  const std::size_t bytes = count * size_of(dtype);
  DeviceGuard guard(st.device);
  st.use_stream(stream);

  // The key holds the requested pipeline (auto stays 0): resolving it is first-use work.
  const ConfigKey key{count, static_cast<int>(dtype), static_cast<int>(op),
                      opts.native ? kNativeCode : static_cast<int>(opts.algorithm), straggler,
                      opts.pipeline, static_cast<int>(opts.phases)};
  auto it = st.configs.find(key);
  if (it == st.configs.end()) {  // first use: build the plan, size scratch, check agreement
    const CostModel cost = opts.cost ? *opts.cost : env().cost;
    int k = 1;
    if (!opts.native && opts.algorithm == Algorithm::stragglar && n >= kMinRanks)
      k = opts.pipeline != kPipelineAuto ? opts.pipeline : choose_pipeline(n, bytes, cost);
    Config cfg;
    std::size_t need = 0;
    if (!opts.native && n > 1) {
      cfg.plan = st.plan_for(opts.algorithm, straggler, k, bytes, cost);
      need = Executor::scratch_bytes(*cfg.plan, count, dtype);
    }
    st.ensure_scratch(need);
    ConfigKey resolved = key;
    resolved.pipeline = k;  // ranks must agree on the K they run, whatever their cost model
    st.check_agreement(resolved, stream);
    it = st.configs.emplace(key, cfg).first;
  }
  if (count == 0) return;

  // ---- enqueue ----
  if (opts.native) {
    STRAGGLAR_NCCL_CHECK(ncclAllReduce(sendbuf, recvbuf, count, to_nccl(dtype), to_nccl(op), comm, stream));
    return;
  }
  if (sendbuf != recvbuf && opts.phases != PhaseSelection::waiting_only) st.dev.copy(recvbuf, sendbuf, bytes);
  if (n == 1) return;  // avg over one rank is the value itself
  st.exec.run(*it->second.plan, recvbuf, count, dtype, op, st.scratch, st.scratch_size, opts.phases);
  STRAGGLAR_CUDA_CHECK(cudaGetLastError());
}

void nccl_comm_release(ncclComm_t comm) {
  std::unique_ptr<CommState> victim;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = states().find(comm);
    if (it == states().end()) return;
    victim = std::move(it->second);
    states().erase(it);
  }
  DeviceGuard guard(victim->device);
  victim.reset();
}

// ---- NCCL ⟷ stragglar types ----
DataType from_nccl(ncclDataType_t t) {
  switch (t) {
    case ncclFloat32: return DataType::float32;
    case ncclFloat64: return DataType::float64;
    case ncclFloat16: return DataType::float16;
    case ncclBfloat16: return DataType::bfloat16;
    case ncclInt32: return DataType::int32;
    case ncclInt64: return DataType::int64;
    default: break;
  }
  const char* name = "an unknown value";
  switch (t) {
    case ncclInt8: name = "ncclInt8"; break;
    case ncclUint8: name = "ncclUint8"; break;
    case ncclUint32: name = "ncclUint32"; break;
    case ncclUint64: name = "ncclUint64"; break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
    case ncclFloat8e4m3: name = "ncclFloat8e4m3"; break;
    case ncclFloat8e5m2: name = "ncclFloat8e5m2"; break;
#endif
    default: break;
  }
  throw Error(ErrorCode::InvalidUsage,
              "unsupported ncclDataType_t " + std::to_string(static_cast<int>(t)) + " (" + name +
                  "); expected ncclFloat32, ncclFloat64, ncclFloat16, ncclBfloat16, ncclInt32 or ncclInt64");
}

ReduceOp from_nccl(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return ReduceOp::sum;
    case ncclProd: return ReduceOp::prod;
    case ncclMin: return ReduceOp::min;
    case ncclMax: return ReduceOp::max;
    case ncclAvg: return ReduceOp::avg;
    default: break;
  }
  throw Error(ErrorCode::InvalidUsage,
              "unsupported ncclRedOp_t " + std::to_string(static_cast<int>(op)) +
                  " (custom ops such as ncclRedOpCreatePreMulSum are not supported); expected "
                  "ncclSum, ncclProd, ncclMin, ncclMax or ncclAvg");
}

ncclDataType_t to_nccl(DataType t) noexcept {
  switch (t) {
    case DataType::float32: return ncclFloat32;
    case DataType::float64: return ncclFloat64;
    case DataType::float16: return ncclFloat16;
    case DataType::bfloat16: return ncclBfloat16;
    case DataType::int32: return ncclInt32;
    case DataType::int64: return ncclInt64;
  }
  return ncclFloat32;
}

ncclRedOp_t to_nccl(ReduceOp op) noexcept {
  switch (op) {
    case ReduceOp::sum: return ncclSum;
    case ReduceOp::prod: return ncclProd;
    case ReduceOp::min: return ncclMin;
    case ReduceOp::max: return ncclMax;
    case ReduceOp::avg: return ncclAvg;
  }
  return ncclSum;
}

}  // namespace stragglar
