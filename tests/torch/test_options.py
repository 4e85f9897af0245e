"""stragglar.torch.Options and the registration (in this process: no ranks needed)."""
import pytest
import torch.distributed as dist

import stragglar.torch as st


def test_defaults_and_values():
    o = st.Options()
    assert (o.algorithm, o.straggler, o.pipeline) == ("stragglar", -1, "auto")
    o = st.Options(algorithm="direct", straggler=3, pipeline=2)
    assert (o.algorithm, o.straggler, o.pipeline) == ("broadcast", 3, 2)  # the table's canonical name
    assert repr(o) == "Options(algorithm='broadcast', straggler=3, pipeline='2')"
    assert st.Options(pipeline="auto").pipeline == "auto"
    assert st.Options(algorithm="auto").algorithm == "auto"


@pytest.mark.parametrize("kwargs, words", [
    ({"algorithm": "fastest"}, ["fastest", "stragglar", "ring"]),
    ({"straggler": -2}, ["straggler=-2"]),
    ({"pipeline": 0}, ["pipeline=0"]),
    ({"pipeline": "many"}, ["many"]),
])
def test_bad_values_are_named(kwargs, words):
    with pytest.raises(ValueError) as e:
        st.Options(**kwargs)
    for w in words:
        assert w in str(e.value), str(e.value)


def test_environment_fills_what_is_not_given(monkeypatch):
    monkeypatch.setenv("STRAGGLAR_ALGORITHM", "ring")
    monkeypatch.setenv("STRAGGLAR_STRAGGLER", "2")
    monkeypatch.setenv("STRAGGLAR_PIPELINE", "4")
    o = st.Options()
    assert (o.algorithm, o.straggler, o.pipeline) == ("ring", 2, 4)
    o = st.Options(algorithm="rhd", straggler=0, pipeline="auto")  # arguments win
    assert (o.algorithm, o.straggler, o.pipeline) == ("rhd", 0, "auto")
    monkeypatch.setenv("STRAGGLAR_ALGORITHM", "nope")
    with pytest.raises(ValueError, match="STRAGGLAR_ALGORITHM"):
        st.Options()
    monkeypatch.setenv("STRAGGLAR_ALGORITHM", "ring")
    monkeypatch.setenv("STRAGGLAR_STRAGGLER", "x")
    with pytest.raises(ValueError, match="STRAGGLAR_STRAGGLER 'x'"):
        st.Options()


def test_registered_for_cpu_and_cuda():
    assert dist.Backend.STRAGGLAR == "stragglar"
    assert dist.Backend.backend_capability["stragglar"] == ["cpu", "cuda"]
    st.register()  # idempotent
    assert "stragglar" in dist.Backend.backend_list


def test_one_rank_group_and_bad_pg_options(tmp_path):
    # A one-rank group in this process: the core's one-rank path, the report, pg_options checks.
    import datetime

    import torch

    store = dist.FileStore(str(tmp_path / "store"), 1)
    with pytest.raises(ValueError, match="straggler"):
        dist.init_process_group("stragglar", store=store, rank=0, world_size=1,
                                pg_options=st.Options(straggler=1))
    dist.init_process_group("stragglar", store=dist.FileStore(str(tmp_path / "store2"), 1), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=10))
    try:
        t = torch.arange(5.0)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert torch.equal(t, torch.arange(5.0))
        with pytest.raises(TypeError, match="stragglar.torch.Options"):
            st.new_group(options="ring")
        assert st.straggler_report()["ran"]
        assert st.info()["options"].algorithm == "stragglar"
    finally:
        dist.destroy_process_group()
