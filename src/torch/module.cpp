// stragglar.torch._C: the Python side of the c10d backend (python/stragglar/torch/__init__.py
// registers it with torch.distributed). Import torch.distributed before this module: the
// Backend and Store types it returns and takes are torch's.
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "backend_options.hpp"
#include "process_group_stragglar.hpp"
#include "stragglar/error.hpp"
#if STRAGGLAR_TORCH_CUDA
#include "cuda_allreduce.hpp"
#endif

namespace py = pybind11;

namespace stragglar::torch_backend {

void run_without_gil(const std::function<void()>& f) {
  // PyGILState_Check answers 1 on a thread without a Python thread state once its check is off
  // (finalization): such a thread holds no GIL to release.
  if (Py_IsInitialized() != 0 && PyGILState_GetThisThreadState() != nullptr && PyGILState_Check() != 0) {
    py::gil_scoped_release release;
    f();
  } else {
    f();
  }
}

namespace {

// The Python factory of inner backends, callable from any thread (it takes the GIL).
InnerFactory python_factory(py::function fn) {
  std::shared_ptr<py::object> holder(new py::object(std::move(fn)), [](py::object* o) {
    if (Py_IsInitialized() == 0) return;  // interpreter gone: leak rather than touch it
    py::gil_scoped_acquire gil;
    delete o;
  });
  return [holder](const std::string& name) -> c10::intrusive_ptr<c10d::Backend> {
    py::gil_scoped_acquire gil;
    try {
      py::object made = (*holder)(name);
      auto* backend = made.cast<c10d::Backend*>();
      TORCH_CHECK(backend != nullptr, "stragglar.torch: the inner backend factory returned None for '", name, "'");
      return c10::intrusive_ptr<c10d::Backend>::unsafe_reclaim_from_nonowning(backend);
    } catch (py::error_already_set& e) {
      TORCH_CHECK(false, "stragglar.torch: making the inner '", name, "' backend failed (every rank of the group ",
                  "takes part in that; one that died, stopped or is busy elsewhere makes it time out): ", e.what());
    }
  };
}

ProcessGroupStragglar& ours(c10d::Backend& backend) {
  auto* pg = dynamic_cast<ProcessGroupStragglar*>(&backend);
  TORCH_CHECK_TYPE(pg != nullptr, "stragglar.torch: this group's backend object is not stragglar's own but a '",
                   backend.getBackendName(), "' object around it or another backend (TORCH_DISTRIBUTED_DEBUG=DETAIL "
                   "wraps every backend); straggler_report and info need a 'stragglar' group without that wrapper");
  return *pg;
}

py::dict report_dict(const GroupReport& r) {
  py::dict d;
  d["device"] = r.device;
  d["ran"] = r.ran;
  d["algorithm"] = r.ran ? py::object(py::str(stragglar::to_string(r.last.algorithm))) : py::object(py::none());
  d["straggler"] = r.ran ? r.last.straggler : -1;
  const StragglerReport& a = r.automatic;
  py::dict automatic;
  automatic["active"] = a.active;
  automatic["algorithm"] = a.active ? py::object(py::str(stragglar::to_string(a.algorithm))) : py::object(py::none());
  automatic["straggler"] = a.straggler;
  automatic["late_rank"] = a.late_rank;
  automatic["late_set"] = a.late_set;  // ranks late together, [] when none
  automatic["delay_s"] = a.delay_s;
  automatic["scores"] = a.scores;
  automatic["calls"] = a.calls;
  automatic["decisions"] = a.decisions;
  automatic["exposed_time_exact"] = a.exposed_time_exact;  // measured on one clock (docs/auto.md)
  automatic["arrival_calls"] = a.arrival_calls;  // calls that took an arrival ticket (docs/arrival-tickets.md)
  automatic["arrival_late_calls"] = a.arrival_late_calls;  // of them, run without their late ranks
  d["auto"] = automatic;
  return d;
}

// Arguments given as None stay unset (the environment decides).
BackendOptions make_options(const py::object& algorithm, const py::object& straggler, const py::object& pipeline) {
  const std::string algo = algorithm.is_none() ? std::string() : algorithm.cast<std::string>();
  int straggler_value = -1;
  const int* straggler_ptr = nullptr;
  if (!straggler.is_none()) {
    if (!py::isinstance<py::int_>(straggler))
      throw Error(ErrorCode::InvalidUsage, "Options(straggler=" + py::repr(straggler).cast<std::string>() +
                                               ") is not valid: expected an int rank (or -1 for the last rank)");
    straggler_value = straggler.cast<int>();
    straggler_ptr = &straggler_value;
  }
  std::string pipe;
  if (py::isinstance<py::int_>(pipeline)) {
    const long k = pipeline.cast<long>();
    if (k < 1)
      throw Error(ErrorCode::InvalidUsage, "Options(pipeline=" + std::to_string(k) +
                                               ") is not valid: expected an integer K >= 1 or 'auto'");
    pipe = std::to_string(k);
  } else if (!pipeline.is_none()) {
    pipe = pipeline.cast<std::string>();
  }
  return BackendOptions::make(algo, straggler_ptr, pipe);
}

}  // namespace
}  // namespace stragglar::torch_backend

PYBIND11_MODULE(_C, m) {
  using namespace stragglar::torch_backend;
  m.doc() = "The c10d backend 'stragglar' (import stragglar.torch instead of this module)";

  // Our errors as Python exceptions: bad values are ValueError, the rest RuntimeError.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const stragglar::Error& e) {
      if (e.code() == stragglar::ErrorCode::InvalidUsage)
        PyErr_SetString(PyExc_ValueError, e.what());
      else
        PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  py::class_<BackendOptions>(m, "Options", R"doc(
Options of a "stragglar" process group, passed as ``pg_options`` to
``torch.distributed.init_process_group`` or ``new_group``.

algorithm: "auto" (default: straggler and algorithm chosen online), "stragglar", "ring", "rhd",
    "allpairs", "broadcast" or "native" (the inner Gloo's / NCCL's own all_reduce); any case.
straggler: the rank expected to be late, in the group's numbering (-1: the last rank); auto
    takes it as a hint. STRAGGLAR_STRAGGLER names a rank of the whole job instead: in a subgroup
    it becomes that rank's group rank, or -1 where the rank is not a member.
pipeline: StragglAR's chunks per rank K (an integer >= 1) or "auto" (the cost model).

A field left as None takes STRAGGLAR_ALGORITHM / STRAGGLAR_STRAGGLER / STRAGGLAR_PIPELINE from the
environment, else the default.)doc")
      .def(py::init(&make_options), py::arg("algorithm") = py::none(), py::arg("straggler") = py::none(),
           py::arg("pipeline") = py::none())
      .def_property_readonly("algorithm", &BackendOptions::algorithm_name)
      .def_property_readonly("straggler", [](const BackendOptions& o) { return o.core.straggler; })
      .def_property_readonly("_straggler_from_env", [](const BackendOptions& o) { return o.straggler_from_env; })
      .def_property_readonly("pipeline", [](const BackendOptions& o) -> py::object {
        if (o.core.pipeline == stragglar::kPipelineAuto) return py::str("auto");
        return py::int_(o.core.pipeline);
      })
      .def("__repr__", &BackendOptions::to_string);

  m.def(
      "_create_backend",
      [](c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout, const BackendOptions& options,
         py::function inner_factory) -> c10::intrusive_ptr<c10d::Backend> {
        return c10::make_intrusive<ProcessGroupStragglar>(
            c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(&store), rank, size, timeout, options,
            python_factory(std::move(inner_factory)));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("options"),
      py::arg("inner_factory"));

  m.def("_options", [](c10d::Backend& b) { return ours(b).options(); }, py::arg("backend"));
  m.def(
      "_report",
      [](c10d::Backend& b, bool cuda) {
        GroupReport r;
        {
          py::gil_scoped_release release;  // waits for a call in flight
          r = ours(b).report(cuda);
        }
        return report_dict(r);
      },
      py::arg("backend"), py::arg("cuda") = false);
  m.def(
      "_describe_peer",
      [](c10d::Backend& b, int peer) { return ours(b).describe_peer(peer); }, py::arg("backend"), py::arg("peer"),
      py::call_guard<py::gil_scoped_release>());
  m.def("_inner_backends", [](c10d::Backend& b) { return ours(b).inner_backends(); }, py::arg("backend"));

  m.def("cuda_built", [] { return static_cast<bool>(STRAGGLAR_TORCH_CUDA); },
        "Whether this build has the CUDA engine (nvcc and NCCL were found when it was built).");
  m.def(
      "_nccl_library",
      []() -> py::object {
#if STRAGGLAR_TORCH_CUDA
        const NcclLibrary lib = loaded_nccl();
        py::dict d;
        d["version"] = lib.version;
        d["path"] = lib.path;
        d["compiled_version"] = lib.compiled_version;
        return d;
#else
        return py::none();
#endif
      },
      "The NCCL this process loaded (ncclGetVersion, the library file) and the nccl.h this module was "
      "compiled with; None without the CUDA engine.");
}
