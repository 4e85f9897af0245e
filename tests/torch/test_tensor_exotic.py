"""Sparse, complex, meta and quantized tensors on the "stragglar" backend:
a correct (delegated) result or a clear error on every rank, and the group stays usable. A meta
tensor has no data: torch's dispatcher answers its all_reduce without any backend (as for Gloo)."""

from harness import run_ranks


def test_sparse_complex_meta_quantized_2_ranks():
    out = run_ranks([("exotic_tensors", {})], nranks=2, store="file")["exotic_tensors"]
    for rank, got in out.items():
        assert got["complex"] == "sum" and got["sparse"] == "sum", (rank, got)
        for kind in ("quantized",):
            assert got[kind] != "returned", f"rank {rank}: a {kind} tensor's all_reduce returned"
            assert got[kind].split(":")[1].strip(), f"rank {rank}: {kind}: an error without a message"
        print(rank, got)
