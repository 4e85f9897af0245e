"""CUDA tensors through the core's NCCL engine. Skipped, with the reason, where there is no GPU or
this build has no CUDA engine; the NCCL check runs wherever the engine is built. Two ranks run on
one GPU too (each its own NCCL_HOSTID, sockets over loopback). scripts/gpu-check.sh runs these
(under pytest, or tests/gpu/run_torch_cuda_tests.py where the machine has no pytest)."""
import pytest
import torch

import stragglar.torch as st

from harness import run_ranks

needs_engine = pytest.mark.skipif(not st._C.cuda_built(),
                                  reason="this build of stragglar.torch has no CUDA engine (nvcc/NCCL not found "
                                         "when it was built): CUDA tensors go to the inner NCCL backend")
needs_a_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (torch.cuda.is_available() is False)")


def rank_env(nranks):
    """More ranks than GPUs: every rank its own NCCL "host" and sockets over loopback, or NCCL
    refuses two ranks on one GPU (docs/gpu.md "Tests")."""
    if torch.cuda.device_count() >= nranks:
        return {}
    return {"NCCL_HOSTID": "stragglar-torch-rank{rank}", "NCCL_NET": "Socket", "NCCL_P2P_DISABLE": "1",
            "NCCL_SHM_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}


@needs_engine
def test_one_nccl_torchs():
    # The one file mapped is the one the extension calls, and torch's own (libtorch_cuda needs
    # libnccl.so.2 too: the loader gave both the library torch loaded first).
    lib = st.nccl_library()
    assert lib is not None
    assert len(lib["loaded_files"]) == 1, lib
    assert lib["loaded_files"][0] == __import__("os").path.realpath(lib["path"]), lib
    assert lib["version"] >= lib["compiled_version"], lib


@needs_engine
@needs_a_gpu
def test_cuda_allreduce_exact_2_ranks():
    run_ranks([("cuda_allreduce", {})], nranks=2, store="tcp", env=rank_env(2))


@needs_engine
@needs_a_gpu
def test_cuda_ddp_2_ranks():
    run_ranks([("cuda_ddp", {})], nranks=2, store="file", env=rank_env(2))


@needs_engine
@needs_a_gpu
def test_cuda_one_rank_in_process(tmp_path):
    # One GPU is enough for the plumbing: the communicator (one rank), the backend stream after
    # the caller's, events, the CUDA future, recordStream, the packed copy of a strided tensor.
    import datetime

    import torch.distributed as dist

    dist.init_process_group("stragglar", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        # CUDA graph capture is refused even as the group's first CUDA all_reduce, before its NCCL
        # communicator exists (creating it would invalidate the capture and fail the group for good).
        first = torch.ones(16, device="cuda")
        with pytest.raises(RuntimeError, match="CUDA graph"):
            with torch.cuda.graph(torch.cuda.CUDAGraph()):
                dist.all_reduce(first)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            base = torch.full((40,), -7.0, device="cuda")
            strided = base[5:25:2]
            strided.copy_(torch.arange(10.0, device="cuda"))
            work = dist.all_reduce(strided, op=dist.ReduceOp.AVG, async_op=True)
            work.wait()
            doubled = strided * 2
        side.synchronize()
        assert torch.equal(doubled.cpu(), torch.arange(10.0) * 2)
        mask = torch.ones(40, dtype=torch.bool)
        mask[5:25:2] = False
        assert torch.equal(base.cpu()[mask], torch.full((30,), -7.0))
        fut = dist.all_reduce(torch.ones(1000, device="cuda"), async_op=True).get_future()
        assert torch.equal(fut.wait()[0].cpu(), torch.ones(1000))
        report = st.straggler_report(device="cuda")
        assert report["ran"] and report["device"].startswith("cuda"), report
        # CUDA graph capture is refused before the backend stream joins it: the capture still
        # ends, and the group still works.
        x = torch.ones(16, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with pytest.raises(RuntimeError, match="CUDA graph"):
            with torch.cuda.graph(graph):
                dist.all_reduce(x)
        dist.all_reduce(x)
        assert torch.equal(x.cpu(), torch.ones(16))
    finally:
        dist.destroy_process_group()
