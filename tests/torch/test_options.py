"""stragglar.torch.Options and the registration (in this process: no ranks needed)."""
import pytest
import torch.distributed as dist

import stragglar.torch as st


def test_defaults_and_values():
    o = st.Options()
    assert (o.algorithm, o.straggler, o.pipeline) == ("auto", -1, "auto")
    o = st.Options(algorithm="direct", straggler=3, pipeline=2)
    assert (o.algorithm, o.straggler, o.pipeline) == ("broadcast", 3, 2)  # the table's canonical name
    assert repr(o) == "Options(algorithm='broadcast', straggler=3, pipeline=2)"
    assert st.Options(algorithm="RING").algorithm == "ring"  # names in any case, as backend names
    assert st.Options(pipeline="auto").pipeline == "auto"
    assert st.Options(algorithm="auto").algorithm == "auto"


@pytest.mark.parametrize("kwargs, words", [
    ({"algorithm": "fastest"}, ["fastest", "stragglar", "ring"]),
    ({"straggler": -2}, ["straggler=-2"]),
    ({"straggler": "x"}, ["straggler='x'", "int"]),
    ({"pipeline": 0}, ["pipeline=0"]),
    ({"pipeline": "many"}, ["many"]),
])
def test_bad_values_are_named(kwargs, words):
    with pytest.raises(ValueError) as e:
        st.Options(**kwargs)
    for w in words:
        assert w in str(e.value), str(e.value)


def _options_in_fresh_process(env):
    """repr(stragglar.torch.Options()) in a new interpreter: the core reads STRAGGLAR_* once per process."""
    import os
    import subprocess
    import sys

    code = "import stragglar.torch as st\ntry:\n    print(repr(st.Options()))\nexcept ValueError as e:\n    print('ValueError:', e)\n"
    full = dict(os.environ)
    for k in ("STRAGGLAR_ALGORITHM", "STRAGGLAR_STRAGGLER", "STRAGGLAR_PIPELINE"):
        full.pop(k, None)
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_environment_fills_what_is_not_given():
    env = {"STRAGGLAR_ALGORITHM": "ring", "STRAGGLAR_STRAGGLER": "2", "STRAGGLAR_PIPELINE": "4"}
    assert _options_in_fresh_process(env) == "Options(algorithm='ring', straggler=2, pipeline=4)"
    o = st.Options(algorithm="rhd", straggler=0, pipeline="auto")  # arguments win
    assert (o.algorithm, o.straggler, o.pipeline) == ("rhd", 0, "auto")
    assert "STRAGGLAR_ALGORITHM" in _options_in_fresh_process({"STRAGGLAR_ALGORITHM": "nope"})
    got = _options_in_fresh_process({"STRAGGLAR_ALGORITHM": "ring", "STRAGGLAR_STRAGGLER": "x"})
    assert got.startswith("ValueError:") and "STRAGGLAR_STRAGGLER='x'" in got, got


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
        assert st.info()["options"].algorithm == "auto"  # the core's default
        # The comm hook with state=None uses the default group, as torch's own hooks do.
        bucket = type("Bucket", (), {"buffer": lambda self, b=torch.arange(4.0): b})()
        assert torch.equal(st.allreduce_hook(None, bucket).wait(), torch.arange(4.0))
    finally:
        dist.destroy_process_group()
