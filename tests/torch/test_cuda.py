"""CUDA tensors through the core's NCCL engine. Skipped, with the reason, where there is no GPU or
this build has no CUDA engine; the NCCL check runs wherever the engine is built."""
import pytest
import torch

import stragglar.torch as st

from harness import run_ranks

needs_engine = pytest.mark.skipif(not st._C.cuda_built(),
                                  reason="this build of stragglar.torch has no CUDA engine (nvcc/NCCL not found "
                                         "when it was built): CUDA tensors go to the inner NCCL backend")
needs_two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2,
                                    reason=f"needs 2 GPUs (one per rank), this machine has "
                                           f"{torch.cuda.device_count()}")


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
@needs_two_gpus
def test_cuda_allreduce_exact_2_ranks():
    run_ranks([("cuda_allreduce", {})], nranks=2, store="tcp")


@needs_engine
@needs_two_gpus
def test_cuda_ddp_2_ranks():
    run_ranks([("cuda_ddp", {})], nranks=2, store="file")
