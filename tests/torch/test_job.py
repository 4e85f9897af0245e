"""A whole job on 'stragglar': async use, delegated collectives, DDP (default path and comm hook),
a rank that dies or stops, torchrun."""
import os
import subprocess
import sys

import pytest

from harness import run_ranks


@pytest.fixture(scope="module")
def four_ranks_tcpstore():
    return run_ranks([("async_ops", {}), ("delegated", {}), ("ddp_training", {}), ("auto_report", {})], nranks=4,
                     store="tcp")


def test_async_wait_and_future(four_ranks_tcpstore):
    assert all(four_ranks_tcpstore["async_ops"].values())


def test_delegated_collectives(four_ranks_tcpstore):
    inner = four_ranks_tcpstore["delegated"]
    # Both inner Gloo backends are made with the group, NCCL is never made on CPU.
    assert all(v == ["gloo", "gloo_native"] for v in inner.values()), inner


def test_ddp_matches_gloo_and_is_identical_on_every_rank(four_ranks_tcpstore):
    diffs = four_ranks_tcpstore["ddp_training"]
    assert all(len(d) == 6 for d in diffs.values()), diffs


def test_auto_through_the_backend_names_the_late_rank(four_ranks_tcpstore):
    # Options(algorithm="auto"): the core's straggler policy (docs/auto.md) behind the backend;
    # rank 2 enters 100 ms late every call; straggler_report shows what the policy saw.
    for report in four_ranks_tcpstore["auto_report"].values():
        assert report["auto"]["late_rank"] == 2, report


def test_callbacks_may_run_collectives_and_futures_are_done_after_wait():
    # Callbacks run on the group's worker; an all_reduce or barrier they issue makes the worker run
    # the queue up to it (no self-wait, as torch's PowerSGD hook needs); wait() returning means the
    # future is complete.
    out = run_ranks([("nested_collectives", {})], nranks=2, store="file", timeout_s=30, deadline_s=200)
    assert all(out["nested_collectives"].values())


def test_a_group_freed_by_its_own_callback_ends_cleanly():
    # The callback's closure held the last reference to the group: the group's destructor runs on
    # its CPU worker, which may not join itself (std::terminate); it hands the worker to a thread
    # that joins it once the callback has returned.
    out = run_ranks([("group_freed_by_its_callback", {})], nranks=2, store="file", timeout_s=30, deadline_s=120)
    assert all(out["group_freed_by_its_callback"].values())


def test_env_straggler_is_a_rank_of_the_job_in_subgroups():
    out = run_ranks([("env_straggler_subgroups", {})], nranks=4, store="file", env={"STRAGGLAR_STRAGGLER": "3"})
    for rank, seen in out["env_straggler_subgroups"].items():
        assert "straggler=3" in seen["world"], seen
        assert ("straggler=1" if rank >= 2 else "straggler=-1") in seen["subgroup"], (rank, seen)
        if rank >= 2:
            assert "straggler=1" in seen["pair"], seen


def test_killed_rank_raises_on_the_others():
    # Ranks that talk to the dead one see it exit (the UCX engine watches processes on this host);
    # the ones waiting for them time out: all within the group's timeout, none hangs.
    out = run_ranks([("dead_peer", {"how": "kill"})], nranks=4, store="file", timeout_s=10, may_die={3})
    results = out["dead_peer"]
    assert set(results) == {0, 1, 2}, results
    for r in results.values():
        assert r["elapsed_s"] < 10 + 10, r
    assert any("rank 3" in r["message"] and "exited" in r["message"] for r in results.values()), results


def test_stopped_rank_times_out_on_the_others():
    out = run_ranks([("dead_peer", {"how": "stop"})], nranks=4, store="file", timeout_s=5, may_die={3},
                    deadline_s=120)
    results = out["dead_peer"]
    assert set(results) == {0, 1, 2}, results
    for r in results.values():
        assert r["elapsed_s"] < 5 + 10, r
        assert "waited 5 s" in r["message"], r


def test_mixed_routing_names_the_other_side():
    # One rank's int8 all_reduce goes to Gloo, the others' float32 to stragglar: each side times
    # out, then the error says what the other side called (docs/reliability.md, class 10).
    out = run_ranks([("mixed_routing", {})], nranks=3, store="file", timeout_s=3, deadline_s=120)
    results = out["mixed_routing"]
    assert set(results) == {0, 1, 2}, results


def test_benchmark_under_torchrun(tmp_path):
    # torchrun's own rendezvous (a TCPStore), the benchmark's three modes, results checked exactly.
    out = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "stragglar.torch.bench", "--size", "1M", "--iters", "2", "--warmup", "1", "--delay-ms", "20",
           "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json

    rows = json.loads(out.read_text())["rows"]
    assert [r["mode"] for r in rows] == ["gloo", "stragglar", "stragglar:ring"]
    assert all(r["wrong"] == 0 for r in rows), rows


def test_latency_benchmark_checks_every_mode(tmp_path):
    # --latency: back-to-back small all_reduce in alternating blocks; auto at 8 B runs the
    # bounded native (Gloo) with no policy; every mode's last call checked exactly.
    out = tmp_path / "latency.json"
    cmd = [sys.executable, "-m", "stragglar.torch.bench", "--nproc", "3", "--size", "8", "--latency",
           "--calls", "40", "--blocks", "4", "--modes", "gloo,stragglar:auto,stragglar:native", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    import json

    result = json.loads(out.read_text())
    assert result["latency"] and result["calls"] == 40 and result["bytes"] == 8
    assert [r["mode"] for r in result["rows"]] == ["gloo", "stragglar:auto", "stragglar:native"]
    assert all(r["wrong"] == 0 and r["us_per_call"] > 0 for r in result["rows"]), result["rows"]
