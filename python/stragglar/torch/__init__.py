"""stragglar.torch: StragglAR's AllReduce as the torch.distributed backend "stragglar".

A working training script changes one line (plus the import that registers the backend)::

    import stragglar.torch                      # registers the backend "stragglar"
    dist.init_process_group("stragglar")        # or "cpu:gloo,cuda:stragglar"

``all_reduce`` of CPU and CUDA tensors (float32/64, float16, bfloat16, int32, int64 x SUM,
PRODUCT, MIN, MAX, AVG) runs through stragglar's runtime core: CPU tensors over UCX on a worker
thread of the group, CUDA tensors over an NCCL communicator of the group's own, stream-ordered.
Everything else — broadcast, all_gather, reduce_scatter, barrier, send/recv, other dtypes and
ops — goes to an inner Gloo (CPU) or NCCL (CUDA) backend made from the same store, so a whole
job (DDP, checkpoints, subgroups) runs on "stragglar" alone. docs/torch.md has the details.

- ``Options(algorithm=, straggler=, pipeline=)``: per group, passed as ``pg_options`` to
  ``init_process_group`` / ``new_group``; unset fields come from STRAGGLAR_ALGORITHM,
  STRAGGLAR_STRAGGLER, STRAGGLAR_PIPELINE.
- ``new_group(ranks=None, options=None)``: a "stragglar" group, e.g. for the DDP comm hook.
- ``allreduce_hook``: a DDP comm hook for jobs that keep NCCL/Gloo as their process group and
  send only the gradients through a "stragglar" group
  (``model.register_comm_hook(stragglar.torch.new_group(), stragglar.torch.allreduce_hook)``).
- ``straggler_report(group)``: what the group's all_reduce ran, and (algorithm="auto") which
  rank it sees as late and the per-rank scores.
- ``info(group)``: options, inner backends, what carries the CPU messages, the NCCL in use.
- ``python -m stragglar.torch.bench``: exposed time under a straggler, Gloo vs stragglar.
"""

from __future__ import annotations

import datetime
import os

# torch first: its libraries (libnccl.so.2 of the nvidia-nccl wheel among them) are then the ones
# this extension uses, and its Backend / Store types exist before _C refers to them.
import torch
import torch.distributed as dist

if not dist.is_available():  # pragma: no cover - torch builds without distributed
    raise ImportError("stragglar.torch needs torch.distributed (this torch was built without it)")

from . import _C  # noqa: E402
from ._C import Options  # noqa: E402
from .hooks import allreduce_hook  # noqa: E402

__all__ = ["Options", "allreduce_hook", "new_group", "straggler_report", "info", "nccl_library", "register"]

BACKEND_NAME = "stragglar"


def _inner_factory(store, rank: int, size: int, timeout: datetime.timedelta):
    """Makes the inner backends (both Gloo ones with the group, NCCL on first use; C++ calls it
    with the GIL): torch's own classes over PrefixStore(name + "/", the group's store). 'gloo_native' is the CPU engine's `native`
    algorithm, used only from the group's worker thread."""

    def make(name: str):
        prefixed = dist.PrefixStore(name + "/", store)
        if name in ("gloo", "gloo_native"):
            return dist.ProcessGroupGloo(prefixed, rank, size, timeout)
        if name == "nccl":
            if not torch.cuda.is_available():
                raise RuntimeError("stragglar.torch: a collective on CUDA tensors needs the inner NCCL "
                                   "backend, but torch.cuda is not available here")
            opts = dist.ProcessGroupNCCL.Options()
            opts._timeout = timeout
            return dist.ProcessGroupNCCL(prefixed, rank, size, opts)
        raise ValueError(f"stragglar.torch: unknown inner backend {name!r}")

    return make


def _group_numbering(options: Options, dist_opts) -> Options:
    """STRAGGLAR_STRAGGLER is one variable for every group of the job, so it names a rank of the whole
    job (as torch's src/dst arguments do): in a subgroup it becomes that rank's group rank, or -1
    (the group's last rank; auto's hint only) where the rank is not a member. Options(straggler=)
    given explicitly is in the group's numbering already."""
    if not options._straggler_from_env:
        return options
    ranks = list(getattr(dist_opts, "global_ranks_in_group", None) or [])
    if not ranks:  # the default group: its numbering is the job's
        return options
    straggler = ranks.index(options.straggler) if options.straggler in ranks else -1
    return Options(algorithm=options.algorithm, straggler=straggler, pipeline=options.pipeline)


def _create_backend(dist_opts, pg_options):
    """The creator torch.distributed calls (extended_api=True) for every "stragglar" group."""
    options = pg_options if pg_options is not None else Options()
    if not isinstance(options, Options):
        raise TypeError(f"pg_options of a 'stragglar' group must be stragglar.torch.Options, "
                        f"got {type(options).__name__}")
    options = _group_numbering(options, dist_opts)
    store, rank, size = dist_opts.store, dist_opts.group_rank, dist_opts.group_size
    # Each instance of this group gets keys of its own: torchrun keeps its store across
    # --max-restarts, where a restarted job would otherwise read the dead workers' UCX addresses
    # and Gloo keys. Every rank makes the group, so each instance adds `size`.
    instance = (store.add("stragglar/instances", 1) - 1) // size
    store = dist.PrefixStore(f"stragglar/{instance}/", store)
    return _C._create_backend(store, rank, size, dist_opts.timeout, options,
                              _inner_factory(store, rank, size, dist_opts.timeout))


def register() -> None:
    """Registers the backend "stragglar" with torch.distributed (done on import; idempotent).
    Also the `torch.distributed.backends` entry point of the installed package."""
    if not hasattr(dist.Backend, BACKEND_NAME.upper()):
        dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"])


def new_group(ranks=None, options: Options | None = None, timeout: datetime.timedelta | None = None):
    """A "stragglar" process group over `ranks` (None: every rank), collective like
    torch.distributed.new_group: every rank of the default group calls it."""
    kwargs = {} if timeout is None else {"timeout": timeout}
    return dist.new_group(ranks=ranks, backend=BACKEND_NAME, pg_options=options, **kwargs)


def _backend(group, device):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return pg._get_backend(torch.device(device))


def straggler_report(group=None, device: str = "cpu") -> dict:
    """What `group`'s all_reduce on `device` ("cpu" or "cuda") ran through the core, and what
    algorithm="auto" sees (docs/auto.md)::

        {"device": "cpu", "ran": True, "algorithm": "stragglar", "straggler": 7,
         "auto": {"active": False, "algorithm": None, "straggler": -1, "late_rank": -1,
                  "late_set": [], "delay_s": 0.0, "scores": [0.0, ...], "calls": 0, "decisions": 0,
                  "exposed_time_exact": False, "arrival_calls": 0, "arrival_late_calls": 0}}

    "algorithm"/"straggler": the choice of the most recent call. "auto": active once an auto
    call ran; then the decided choice, the rank late in most calls of the last window, its
    median delay, and per rank a score in [0, 1] (1: the latest); "exposed_time_exact": whether it
    measures each call's exposed time on one clock (every rank on one machine, the CPU engine)
    rather than estimating it from in-call times (docs/auto.md); "arrival_calls": the calls that
    took an arrival ticket (every rank on one host: docs/arrival-tickets.md), "arrival_late_calls"
    those of them that went on without their late ranks. Waits for a call in flight."""
    return _C._report(_backend(group, device), cuda=torch.device(device).type == "cuda")


def _loaded_nccl_files() -> list[str]:
    """Every libnccl.so* file mapped into this process (resolved paths)."""
    files = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith("libnccl.so"):
                files.add(os.path.realpath(path))
    return sorted(files)


def nccl_library() -> dict | None:
    """The NCCL this process runs, as the extension sees it; None without the CUDA engine::

        {"version": (2, 30, 7),                    # ncclGetVersion: the library in use
         "path": ".../nvidia/nccl/lib/libnccl.so.2",
         "compiled_version": (2, 28, 9),           # the nccl.h this extension was compiled with
         "torch_compiled_version": (2, 30, 7),     # torch.cuda.nccl.version(): torch's nccl.h
         "loaded_files": [".../libnccl.so.2"]}     # every libnccl mapped into the process: one
    """
    lib = _C._nccl_library()
    if lib is None:
        return None

    def triple(code):
        return (code // 10000, code // 100 % 100, code % 100)

    out = {"version": triple(lib["version"]), "path": lib["path"], "compiled_version": triple(lib["compiled_version"])}
    try:
        out["torch_compiled_version"] = tuple(torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001 - torch without NCCL
        out["torch_compiled_version"] = None
    out["loaded_files"] = _loaded_nccl_files()
    return out


def info(group=None) -> dict:
    """This rank's view of a "stragglar" group: its options, the inner backends made so far, what
    carries the CPU engine's messages to each peer (after the first CPU all_reduce), the NCCL."""
    backend = _backend(group, "cpu")
    size = backend.size()
    return {
        "options": _C._options(backend),
        "inner_backends": [b for b in _C._inner_backends(backend).split(", ") if b],
        "peers": {p: _C._describe_peer(backend, p) for p in range(size) if p != backend.rank()},
        "cuda_engine": _C.cuda_built(),
        "nccl": nccl_library(),
    }


def _check_one_nccl() -> None:
    """One NCCL per process, torch's: the extension links libnccl.so.2 by soname and is loaded after
    torch loaded its own, so exactly one libnccl file may be mapped, and it is the one ours calls."""
    lib = nccl_library()
    if lib is None:
        return
    if len(lib["loaded_files"]) != 1 or os.path.realpath(lib["path"]) not in lib["loaded_files"]:
        raise ImportError(f"stragglar.torch: this process has loaded NCCL from {lib['loaded_files']} and the "
                          f"extension calls {lib['path']}: expected one NCCL, torch's. Import torch before "
                          f"anything that loads another libnccl.so.2 (LD_PRELOAD, LD_LIBRARY_PATH).")


_check_one_nccl()
register()
