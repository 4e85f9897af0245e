"""all_reduce through the runtime core, CPU tensors, several ranks as processes: exact results for
every dtype x op and every algorithm, any kind of tensor, async use, changing sizes, subgroups,
arguments that differ across ranks. Cases of one job share its ranks (starting them is slow)."""
import pytest

from harness import run_ranks

ALL_ALGORITHMS = ("auto", "stragglar", "ring", "rhd", "allpairs", "broadcast", "native")


@pytest.fixture(scope="module")
def four_ranks_filestore():
    return run_ranks([("allreduce_exact", {"counts": (1, 7, 1000, 65537)}),
                      ("tensor_kinds", {}),
                      ("bucket_sizes", {}),
                      ("subgroups", {}),
                      ("mismatch", {})], nranks=4, store="file")


def test_every_dtype_and_op_4_ranks_filestore(four_ranks_filestore):
    assert set(four_ranks_filestore["allreduce_exact"].values()) == {6 * 5 * 4}


def test_every_kind_of_tensor(four_ranks_filestore):
    assert all(four_ranks_filestore["tensor_kinds"].values())


def test_changing_sizes_like_ddp_buckets(four_ranks_filestore):
    assert set(four_ranks_filestore["bucket_sizes"].values()) == {21}


def test_subgroups_with_their_own_options(four_ranks_filestore):
    # The subgroups' own reports are checked on the ranks; the default group's still shows its own
    # (default: auto) state, untouched by the subgroups' calls.
    assert all(r["ran"] and r["auto"]["active"] for r in four_ranks_filestore["subgroups"].values())


def test_mismatched_count_dtype_op_fail_on_every_rank(four_ranks_filestore):
    errors = four_ranks_filestore["mismatch"]
    assert set(errors) == {0, 1, 2, 3}
    for e in errors.values():
        assert set(e) == {"count", "dtype", "op"}, e


def test_every_dtype_and_op_2_ranks_tcpstore():
    run_ranks([("allreduce_exact", {"counts": (1, 1000)})], nranks=2, store="tcp")


def test_every_algorithm_3_ranks_env_init():
    # env:// (a TCPStore from MASTER_ADDR/PORT), as torchrun starts ranks; 3 is not a power of two.
    run_ranks([("allreduce_exact", {"counts": (5, 4099), "algorithms": ALL_ALGORITHMS,
                                    "ops": ("sum", "avg", "max", "prod")})], nranks=3, store="env")
