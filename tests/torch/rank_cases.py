"""What each rank runs in the multi-process tests (harness.run_ranks calls these by name, in the
rank's process, after init_process_group). Each returns something small and picklable; a failed
check raises (AssertionError with the values), which fails the test with this rank's traceback.

Inputs are small integers (quarters after AVG), so every dtype reduces exactly and results must
*equal* a float64 reference, on every rank.
"""

from __future__ import annotations

import datetime
import os
import signal
import threading
import time

import torch
import torch.distributed as dist

import stragglar.torch as st

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
OPS = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
       "avg": dist.ReduceOp.AVG}


def inputs(rank: int, count: int, op: str, dtype, salt: int = 0) -> torch.Tensor:
    """Rank `rank`'s values: small integers whose reduction over a few ranks is exact in every dtype
    (products of at most four factors of magnitude <= 2)."""
    i = torch.arange(count, dtype=torch.int64)
    if op == "prod":
        v = torch.tensor([-2, -1, 1, 2], dtype=torch.int64)[(i * 5 + rank * 3 + salt) % 4]
    else:
        v = (i * 7 + rank * 3 + salt) % 9 - 4
    return v.to(dtype)


def reference(nranks: int, count: int, op: str, dtype, salt: int = 0) -> torch.Tensor:
    """The reduction over ranks in float64, then in `dtype` (exact by construction of inputs)."""
    xs = torch.stack([inputs(r, count, op, torch.float64, salt) for r in range(nranks)])
    if op == "sum":
        out = xs.sum(0)
    elif op == "prod":
        out = xs.prod(0)
    elif op == "min":
        out = xs.min(0).values
    elif op == "max":
        out = xs.max(0).values
    else:
        out = xs.sum(0) / nranks
        if not dtype.is_floating_point:
            out = torch.trunc(out)  # integer AVG: truncating division, as NCCL
    return out.to(dtype)


def check_equal(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        first = bad[0].tolist() if len(bad) else []
        raise AssertionError(f"{what}: {len(bad)} elements differ, first at {first}: got "
                             f"{got[tuple(first)].item() if first else got} want {want[tuple(first)].item() if first else want}")


def allreduce_exact(rank, nranks, counts=(1, 7, 1000), algorithms=("stragglar",), dtypes=None, ops=None):
    """Every dtype x op x count through each algorithm's group, against the float64 reference."""
    # The default group runs the core's default, auto; every other algorithm gets a group of its own.
    groups = {a: (None if a == "auto" else st.new_group(options=st.Options(algorithm=a))) for a in algorithms}
    calls = 0
    for algo, group in groups.items():
        for dtype in dtypes or DTYPES:
            for op in ops or OPS:
                for count in counts:
                    t = inputs(rank, count, op, dtype, salt=count)
                    dist.all_reduce(t, op=OPS[op], group=group)
                    check_equal(t, reference(nranks, count, op, dtype, salt=count),
                                f"{algo} {dtype} {op} count={count}")
                    calls += 1
    return calls


def tensor_kinds(rank, nranks):
    """Any tensor a user may pass: the result lands in it and nothing outside it is touched."""
    ref = lambda count, salt=0: reference(nranks, count, "sum", torch.float32, salt)  # noqa: E731

    # A contiguous view with a storage offset: in place, neighbours untouched.
    base = torch.full((20,), 99.0)
    view = base[3:13]
    view.copy_(inputs(rank, 10, "sum", torch.float32))
    dist.all_reduce(view)
    check_equal(view, ref(10), "offset view")
    check_equal(base[:3], torch.full((3,), 99.0), "before the offset view")
    check_equal(base[13:], torch.full((7,), 99.0), "after the offset view")

    # Strided (every other element): through a packed copy, the gaps untouched.
    base = torch.full((40,), -7.0)
    strided = base[5:25:2]
    strided.copy_(inputs(rank, 10, "sum", torch.float32))
    dist.all_reduce(strided)
    check_equal(strided, ref(10), "strided view")
    mask = torch.ones(40, dtype=torch.bool)
    mask[5:25:2] = False
    check_equal(base[mask], torch.full((30,), -7.0), "gaps of the strided view")

    # Transposed 2-D, channels-last 4-D, a 0-dim tensor, empty ones.
    m = inputs(rank, 12, "sum", torch.float64).reshape(3, 4).t()
    dist.all_reduce(m)
    check_equal(m, reference(nranks, 12, "sum", torch.float64).reshape(3, 4).t(), "transposed")
    cl = inputs(rank, 2 * 3 * 4 * 5, "max", torch.bfloat16).reshape(2, 3, 4, 5).contiguous(
        memory_format=torch.channels_last)
    dist.all_reduce(cl, op=dist.ReduceOp.MAX)
    check_equal(cl, reference(nranks, 120, "max", torch.bfloat16).reshape(2, 3, 4, 5), "channels_last")
    s = torch.tensor(float(rank + 1))
    dist.all_reduce(s)
    check_equal(s, torch.tensor(float(nranks * (nranks + 1) // 2)), "0-dim")
    for shape in [(0,), (0, 3), (4, 0)]:
        e = torch.empty(shape, dtype=torch.int32)
        dist.all_reduce(e)
        assert e.shape == shape
    # A tensor whose elements share memory is refused, on every rank, before anything is sent.
    try:
        dist.all_reduce(torch.ones(1).expand(4))
        raise AssertionError("an expanded tensor was accepted")
    except ValueError as e:
        assert "overlap" in str(e), e

    # Large enough to be cut into many chunks (pipelined StragglAR), odd length.
    n = (1 << 20) + 3
    big = inputs(rank, n, "sum", torch.float32, salt=5)
    dist.all_reduce(big)
    check_equal(big, ref(n, 5), "1M+3 elements")
    return True


def async_ops(rank, nranks):
    """async_op=True: Work.wait, is_completed, get_future (with then), several in flight."""
    # A late rank: the others' Work cannot have completed when all_reduce returns.
    t = inputs(rank, 1000, "sum", torch.float32)
    if rank == nranks - 1:
        time.sleep(0.5)
    work = dist.all_reduce(t, async_op=True)
    if rank != nranks - 1:
        assert not work.is_completed(), "all_reduce returned after completing, with a rank still asleep"
    assert work.wait() is True
    assert work.is_completed()
    check_equal(t, reference(nranks, 1000, "sum", torch.float32), "async wait")

    # Several in flight, waited in reverse order; results land in their own tensors.
    ts = [inputs(rank, 100 + i, "max", torch.int64, salt=i) for i in range(6)]
    works = [dist.all_reduce(x, op=dist.ReduceOp.MAX, async_op=True) for x in ts]
    for w in reversed(works):
        w.wait(timeout=datetime.timedelta(seconds=30))
    for i, x in enumerate(ts):
        check_equal(x, reference(nranks, 100 + i, "max", torch.int64, salt=i), f"in flight {i}")

    # get_future: the value is [tensor] (DDP's default path reads it), then() chains.
    f = inputs(rank, 64, "avg", torch.float64)
    fut = dist.all_reduce(f, op=dist.ReduceOp.AVG, async_op=True).get_future()
    doubled = fut.then(lambda x: x.value()[0] * 2).wait()
    check_equal(fut.value()[0], reference(nranks, 64, "avg", torch.float64), "future value")
    assert fut.value()[0].data_ptr() == f.data_ptr(), "the future's tensor is not the user's"
    check_equal(doubled, reference(nranks, 64, "avg", torch.float64) * 2, "then()")
    return True


def bucket_sizes(rank, nranks, rounds=3):
    """A changing sequence of sizes, like DDP's buckets over several steps."""
    sizes = [1000, 250_000, 3, 1000, 65_537, 250_000, 1]
    for step in range(rounds):
        for k, count in enumerate(sizes):
            salt = step * 31 + k
            t = inputs(rank, count, "sum", torch.float32, salt=salt)
            dist.all_reduce(t)
            check_equal(t, reference(nranks, count, "sum", torch.float32, salt=salt), f"step {step} size {count}")
    return len(sizes) * rounds


def subgroups(rank, nranks):
    """new_group with its own options; ranks outside a group are not members."""
    assert nranks >= 3
    first = st.new_group(ranks=[0, 1, 2], options=st.Options(algorithm="stragglar", straggler=0))
    pair = st.new_group(ranks=[1, nranks - 1], options=st.Options(algorithm="ring"))
    if rank in (0, 1, 2):
        t = inputs(rank, 500, "sum", torch.int32)
        dist.all_reduce(t, group=first)
        want = sum(inputs(r, 500, "sum", torch.int32) for r in (0, 1, 2))
        check_equal(t, want, "group [0, 1, 2]")
        report = st.straggler_report(first)
        assert report["algorithm"] == "stragglar" and report["straggler"] == 0, report
    else:
        assert first == dist.GroupMember.NON_GROUP_MEMBER
    if rank in (1, nranks - 1):
        t = inputs(rank, 77, "min", torch.float16)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=pair)
        want = torch.minimum(inputs(1, 77, "min", torch.float16), inputs(nranks - 1, 77, "min", torch.float16))
        check_equal(t, want, "group [1, n-1]")
        assert st.straggler_report(pair)["algorithm"] == "ring"
    report = st.straggler_report()
    return report


def delegated(rank, nranks):
    """Everything the core does not do goes to the inner Gloo, so a whole job runs on 'stragglar'."""
    x = torch.arange(6, dtype=torch.float32) + rank
    dist.broadcast(x, src=1)
    check_equal(x, torch.arange(6, dtype=torch.float32) + 1, "broadcast")

    gathered = [torch.empty(3, dtype=torch.int64) for _ in range(nranks)]
    dist.all_gather(gathered, torch.full((3,), rank, dtype=torch.int64))
    for r, g in enumerate(gathered):
        check_equal(g, torch.full((3,), r, dtype=torch.int64), "all_gather")
    flat = torch.empty(nranks * 2)
    dist.all_gather_into_tensor(flat, torch.full((2,), float(rank)))
    check_equal(flat, torch.arange(nranks).repeat_interleave(2).float(), "all_gather_into_tensor")

    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, torch.arange(nranks * 2, dtype=torch.float32) * (rank + 1))
    check_equal(out, torch.arange(rank * 2, rank * 2 + 2, dtype=torch.float32) * (nranks * (nranks + 1) // 2),
                "reduce_scatter_tensor")
    r = torch.tensor([float(rank)])
    dist.reduce(r, dst=0)
    if rank == 0:
        check_equal(r, torch.tensor([float(nranks * (nranks - 1) // 2)]), "reduce")
    g = [torch.empty(1) for _ in range(nranks)] if rank == 0 else None
    dist.gather(torch.tensor([float(rank)]), g, dst=0)
    if rank == 0:
        check_equal(torch.cat(g), torch.arange(nranks).float(), "gather")
    s = torch.empty(1)
    dist.scatter(s, [torch.tensor([float(i * 10)]) for i in range(nranks)] if rank == 0 else None, src=0)
    check_equal(s, torch.tensor([float(rank * 10)]), "scatter")
    a2a = torch.empty(nranks, dtype=torch.int64)
    dist.all_to_all_single(a2a, torch.arange(nranks, dtype=torch.int64) + 100 * rank)
    check_equal(a2a, torch.arange(nranks, dtype=torch.int64) * 100 + rank, "all_to_all_single")

    # Point to point: a ring.
    send = torch.tensor([rank])
    recv = torch.empty(1, dtype=torch.int64)
    reqs = [dist.isend(send, (rank + 1) % nranks), dist.irecv(recv, (rank - 1) % nranks)]
    for q in reqs:
        q.wait()
    check_equal(recv, torch.tensor([(rank - 1) % nranks]), "isend/irecv")

    # all_reduce of what the core does not take: other dtypes, bitwise ops, complex.
    u = torch.tensor([rank + 1, 2], dtype=torch.uint8)
    dist.all_reduce(u)
    check_equal(u, torch.tensor([nranks * (nranks + 1) // 2, 2 * nranks], dtype=torch.uint8), "uint8 sum")
    b = torch.tensor([6 + rank], dtype=torch.int64)
    dist.all_reduce(b, op=dist.ReduceOp.BAND)
    want = 6
    for q in range(nranks):
        want &= 6 + q
    check_equal(b, torch.tensor([want]), "BAND")
    c = torch.tensor([complex(rank, 1)], dtype=torch.complex64)
    dist.all_reduce(c)
    check_equal(c, torch.tensor([complex(nranks * (nranks - 1) // 2, nranks)], dtype=torch.complex64), "complex")

    objs = [None] * nranks
    dist.all_gather_object(objs, {"rank": rank})
    assert [o["rank"] for o in objs] == list(range(nranks)), objs
    dist.barrier()
    try:
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))  # the inner Gloo's
    except ValueError as e:
        # torch 2.11 refuses it in Python for every backend but "gloo" before asking the backend.
        assert "only implemented for GLOO" in str(e), e
    return st.info()["inner_backends"]


def mismatch(rank, nranks):
    """Arguments that differ across ranks: an error on every rank, the tensor untouched, and the
    group still works afterwards. On a group of its own: the core checks arguments on the first
    call of each configuration, and a configuration that some rank has run before on the group
    skips that check there (docs/runtime.md: such a mismatch ends in a timeout, never wrong data)."""
    group = st.new_group()
    errors = {}
    cases = {
        "count": lambda: torch.ones(10 if rank == 0 else 11),
        "dtype": lambda: torch.ones(8, dtype=torch.float64 if rank == 0 else torch.float32),
    }
    for field, make in cases.items():
        t = make()
        before = t.clone()
        try:
            dist.all_reduce(t, group=group)
            raise AssertionError(f"a mismatched {field} was accepted")
        except dist.DistBackendError as e:
            errors[field] = str(e)
            # The first field that differs is named (the pipeline K resolved from the bytes may
            # come first: it is checked before count and dtype).
            assert f"ranks disagree on {field}" in str(e) or "ranks disagree on pipeline" in str(e), str(e)
        check_equal(t, before, f"tensor after a mismatched {field}")
    t = torch.ones(5)
    try:
        dist.all_reduce(t, op=dist.ReduceOp.MAX if rank == 0 else dist.ReduceOp.SUM, group=group)
        raise AssertionError("a mismatched op was accepted")
    except dist.DistBackendError as e:
        errors["op"] = str(e)
        assert "ranks disagree on op" in str(e), str(e)
    t = inputs(rank, 33, "sum", torch.float32)
    dist.all_reduce(t, group=group)
    check_equal(t, reference(nranks, 33, "sum", torch.float32), "after the mismatches")
    return errors


def mixed_routing(rank, nranks):
    """Rank 0's tensor is int8 (stragglar does not serve it: it goes to Gloo) while the others'
    are float32 (stragglar's): the two collectives never meet. Every rank must raise an error that
    names what the other side called, not only its own timeout."""
    t = torch.ones(64, dtype=torch.int8 if rank == 0 else torch.float32)
    before = t.clone()
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        raise AssertionError("a call routed to Gloo on one rank and to stragglar on the others succeeded")
    except dist.DistBackendError as e:
        message = str(e)
    elapsed = time.monotonic() - start
    assert "called collective #" in message and "differently" in message, message
    if rank == 0:
        assert "float32[64] (sum, cpu) through stragglar" in message, message
    else:
        assert "int8[64] (sum, cpu) through Gloo" in message and "rank 0 called" in message, message
    check_equal(t, before, "the tensor after the mismatch")  # neither side reduced anything
    return {"elapsed_s": elapsed, "message": message}


def dead_peer(rank, nranks, how):
    """The last rank dies (SIGKILL) or stops (SIGSTOP) after a first all_reduce; every other rank
    must raise, within the group's timeout, instead of hanging."""
    t = inputs(rank, 1000, "sum", torch.float32)
    dist.all_reduce(t)  # connected, configuration known
    if rank == nranks - 1:
        os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
        time.sleep(60)  # not reached for SIGKILL; the parent ends a stopped process
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        raise AssertionError(f"all_reduce succeeded with rank {nranks - 1} {how}ed")
    except dist.DistBackendError as e:
        message = str(e)
    elapsed = time.monotonic() - start
    # Broken from now on: later calls fail at once with the first error.
    try:
        dist.all_reduce(t)
        raise AssertionError("the group still ran after the failure")
    except dist.DistBackendError as e:
        assert "unusable after an earlier failure" in str(e), str(e)
    return {"elapsed_s": elapsed, "message": message}


def _train(model, group, steps, rank, hook_group=None):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(model, process_group=group, bucket_cap_mb=0.002)  # several buckets of changing sizes
    if hook_group is not None:
        ddp.register_comm_hook(hook_group, st.allreduce_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1000 + rank)
    for _ in range(steps):
        x = torch.randn(32, 16, generator=gen)
        y = torch.randn(32, 4, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4))


def ddp_training(rank, nranks, steps=6):
    """DDP on 'stragglar' (the default group here) gives the parameters of the same run on Gloo,
    within fp32 rounding, identical on every rank; so does Gloo DDP with the comm hook."""
    gloo = dist.new_group(backend="gloo")
    hook_group = st.new_group()
    # Different initial weights per rank: DDP's broadcast from rank 0 (delegated) must fix that.
    on_gloo = _train(_model(rank), gloo, steps, rank)
    on_stragglar = _train(_model(rank), None, steps, rank)
    with_hook = _train(_model(rank), gloo, steps, rank, hook_group=hook_group)
    for a, b, c in zip(on_gloo, on_stragglar, with_hook):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(c, a, rtol=1e-5, atol=1e-6)
    # Identical bits on every rank (gathered through the delegated all_gather).
    for mine in on_stragglar + with_hook:
        everyone = [torch.empty_like(mine) for _ in range(nranks)]
        dist.all_gather(everyone, mine)
        for r, theirs in enumerate(everyone):
            assert torch.equal(theirs, mine), f"rank {r}'s parameters differ from rank {rank}'s"
    report = st.straggler_report()  # the default group: auto, the core's default
    assert report["ran"] and report["auto"]["active"] and report["auto"]["calls"] > 0, report
    return [float((a - b).abs().max()) for a, b in zip(on_gloo, on_stragglar)]


def cuda_allreduce(rank, nranks):
    """CUDA tensors: every dtype x op exact, any tensor, async on the caller's stream, delegation.
    Ranks may share a GPU (rank % device_count; the test gives each its own NCCL_HOSTID)."""
    torch.cuda.set_device(rank % torch.cuda.device_count())
    dev = torch.device("cuda", rank % torch.cuda.device_count())
    for dtype in DTYPES:
        for op in OPS:
            for count in (1, 7, 1000, 65537):
                t = inputs(rank, count, op, dtype, salt=count).to(dev)
                dist.all_reduce(t, op=OPS[op])
                check_equal(t.cpu(), reference(nranks, count, op, dtype, salt=count), f"cuda {dtype} {op} {count}")
    base = torch.full((40,), -7.0, device=dev)
    strided = base[5:25:2]
    strided.copy_(inputs(rank, 10, "sum", torch.float32).to(dev))
    dist.all_reduce(strided)
    check_equal(strided.cpu(), reference(nranks, 10, "sum", torch.float32), "cuda strided")
    mask = torch.ones(40, dtype=torch.bool)
    mask[5:25:2] = False
    check_equal(base.cpu()[mask], torch.full((30,), -7.0), "cuda gaps")
    # Stream order: produced on a side stream, reduced there, consumed there after wait().
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        x = torch.full((1 << 20,), float(rank + 1), device=dev)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        y = x * 2
    side.synchronize()
    check_equal(y.cpu(), torch.full((1 << 20,), float(nranks * (nranks + 1))), "cuda side stream")
    fut = dist.all_reduce(torch.ones(8, device=dev), async_op=True).get_future()
    check_equal(fut.wait()[0].cpu(), torch.full((8,), float(nranks)), "cuda future")
    b = torch.arange(4, device=dev) + rank
    dist.broadcast(b, src=0)
    check_equal(b.cpu(), torch.arange(4), "cuda broadcast (inner NCCL)")
    report = st.straggler_report(device="cuda")
    assert report["ran"] and report["device"].startswith("cuda"), report
    return st.nccl_library()


def cuda_ddp(rank, nranks, steps=6):
    """DDP on CUDA: 'stragglar' vs NCCL, and NCCL DDP with the comm hook."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = rank % torch.cuda.device_count()  # ranks may share a GPU (see cuda_allreduce)
    torch.cuda.set_device(device)
    nccl = dist.new_group(backend="nccl")
    hook_group = st.new_group()

    def train(group, hook=None):
        model = _model(rank).cuda()
        ddp = DDP(model, device_ids=[device], process_group=group, bucket_cap_mb=0.002)
        if hook is not None:
            ddp.register_comm_hook(hook, st.allreduce_hook)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
        gen = torch.Generator().manual_seed(1000 + rank)
        for _ in range(steps):
            x, y = torch.randn(32, 16, generator=gen).cuda(), torch.randn(32, 4, generator=gen).cuda()
            opt.zero_grad()
            torch.nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        return [p.detach().cpu() for p in model.parameters()]

    a, b, c = train(nccl), train(None), train(nccl, hook_group)
    for x, y, z in zip(a, b, c):
        torch.testing.assert_close(y, x, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(z, x, rtol=1e-5, atol=1e-6)
    return True


def auto_report(rank, nranks, calls=15, late=2, delay_s=0.1):
    """algorithm="auto" through the backend: exact results, and the report names the late rank."""
    group = st.new_group(options=st.Options(algorithm="auto"))
    for i in range(calls):
        t = inputs(rank, 50_000, "sum", torch.float32, salt=i)
        dist.barrier()
        if rank == late:
            time.sleep(delay_s)
        dist.all_reduce(t, group=group)
        check_equal(t, reference(nranks, 50_000, "sum", torch.float32, salt=i), f"auto call {i}")
    report = st.straggler_report(group)
    a = report["auto"]
    # Decided by the policy's exchanges, or call by call by arrival tickets (every rank on this
    # host: docs/arrival-tickets.md), which then name the late rank in the report.
    assert a["active"] and a["calls"] == calls, report
    assert a["decisions"] >= 1 or a["arrival_late_calls"] >= 1, report
    assert len(a["scores"]) == nranks, report
    assert a["late_rank"] == late, report
    if os.path.exists("/proc/sys/kernel/random/boot_id"):  # the clock id (docs/auto.md)
        assert a["exposed_time_exact"], report  # every rank on this machine: one clock
    return report


def nested_collectives(rank, nranks):
    """A future callback that runs another all_reduce on the same group and waits for it (torch's
    PowerSGD hook does this); a barrier inside a callback; a Work's future is complete when wait()
    returns (as Gloo)."""
    t = inputs(rank, 300, "sum", torch.float32)

    def again(fut):
        u = fut.value()[0].clone()
        dist.all_reduce(u, async_op=True).get_future().wait()  # on the same group, inside the callback
        return u

    out = dist.all_reduce(t, async_op=True).get_future().then(again).wait()
    check_equal(out, reference(nranks, 300, "sum", torch.float32) * nranks, "all_reduce inside a callback")

    def barrier_then_value(fut):
        dist.barrier()  # delegated; orders after this group's queued all_reduces
        return fut.value()[0]

    a = inputs(rank, 20, "max", torch.int64)
    got = dist.all_reduce(a, op=dist.ReduceOp.MAX, async_op=True).get_future().then(barrier_then_value).wait()
    check_equal(got, reference(nranks, 20, "max", torch.int64), "barrier inside a callback")

    not_done = 0
    for i in range(40):
        x = inputs(rank, 10, "sum", torch.float32, salt=i)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        not_done += not work.get_future().done()
    assert not_done == 0, f"{not_done} of 40 futures not done right after wait()"

    return True


def group_freed_by_its_callback(rank, nranks):
    """A group whose last reference is a future callback's closure: the group is destroyed when
    that callback has run, on the group's CPU worker, which cannot join itself. The callback's
    value arrives, later groups work, and the process ends normally (the harness sees its exit)."""
    g = st.new_group(options=st.Options(algorithm="ring"))
    t = inputs(rank, 1000, "sum", torch.float32)
    if rank == 0:
        fut = dist.all_reduce(t, group=g, async_op=True).get_future()  # rank 1 not in it yet: pending
        released, ran_on = threading.Event(), []

        def callback(f, g=g):  # the closure holds the group
            ran_on.append(threading.get_ident())
            released.wait(60)  # until the main thread has dropped every other reference
            return f.value()[0].clone()

        chained = fut.then(callback)
        del callback  # the future's reference to it is the only one left
        dist.barrier()  # the default group: rank 1 calls only now, so the callback is attached first
        dist.destroy_process_group(g)
        del g
        released.set()
        got = chained.wait()
        assert ran_on and ran_on[0] != threading.get_ident(), "the callback did not run on the group's worker"
    else:
        dist.barrier()
        got = dist.all_reduce(t, group=g, async_op=True).get_future().wait()[0]
        dist.destroy_process_group(g)
        del g
    check_equal(got, reference(nranks, 1000, "sum", torch.float32), "the callback that held the group")
    again = inputs(rank, 50, "sum", torch.float32)
    dist.all_reduce(again)
    check_equal(again, reference(nranks, 50, "sum", torch.float32), "the default group afterwards")
    return True


def env_straggler_subgroups(rank, nranks):
    """STRAGGLAR_STRAGGLER (set for the whole job) names a rank of the job: a subgroup that holds it
    uses its group rank, one that does not uses -1; explicit Options stay in the group's numbering."""
    assert nranks == 4 and os.environ.get("STRAGGLAR_STRAGGLER") == "3"
    mine, _ = dist.new_subgroups(group_size=2)  # [0, 1] and [2, 3]
    pair = st.new_group([2, 3])
    t = inputs(rank, 50, "sum", torch.float32)
    dist.all_reduce(t, group=mine)
    members = [0, 1] if rank < 2 else [2, 3]
    check_equal(t, sum(inputs(r, 50, "sum", torch.float32) for r in members), "subgroup with STRAGGLAR_STRAGGLER")
    seen = {"world": repr(st.info()["options"]), "subgroup": repr(st.info(mine)["options"])}
    if rank >= 2:
        seen["pair"] = repr(st.info(pair)["options"])
    return seen


def exotic_tensors(rank: int, nranks: int):
    """Issue #22 item 4: tensors the core does not take. Complex and sparse give the correct sum
    (complex through torch's real view, sparse through the inner Gloo); meta and quantized raise
    an error naming what they are, on every rank, and the group stays usable."""
    out = {}
    z = torch.tensor([complex(rank, 1), complex(1, -rank)], dtype=torch.complex64)
    dist.all_reduce(z)
    s = sum(range(nranks))
    assert torch.equal(z, torch.tensor([complex(s, nranks), complex(nranks, -s)], dtype=torch.complex64)), z
    out["complex"] = "sum"
    i = torch.tensor([[0, 2], [1, 0]])
    sp = torch.sparse_coo_tensor(i, torch.tensor([float(rank + 1), 2.0]), (3, 2))
    dist.all_reduce(sp)
    dense = torch.zeros(3, 2)
    dense[0, 1] = sum(r + 1 for r in range(nranks))
    dense[2, 0] = 2.0 * nranks
    assert torch.equal(sp.to_dense(), dense), sp.to_dense()
    out["sparse"] = "sum"
    for kind, make in [("meta", lambda: torch.empty(4, device="meta")),
                       ("quantized", lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8))]:
        try:
            dist.all_reduce(make())
            out[kind] = "returned"
        except Exception as e:  # noqa: BLE001  the message is what is checked
            out[kind] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    t = torch.ones(3)
    dist.all_reduce(t)  # still usable
    assert torch.equal(t, torch.full((3,), float(nranks))), t
    return out
