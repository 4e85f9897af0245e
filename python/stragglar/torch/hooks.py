"""A DDP communication hook that sends the gradients through a "stragglar" group.

For jobs that keep NCCL or Gloo as their process group (everything else stays there) and want
only the gradient AllReduce to tolerate a straggler::

    import stragglar.torch
    dist.init_process_group("nccl")                      # unchanged
    model = DDP(model, device_ids=[local_rank])
    model.register_comm_hook(stragglar.torch.new_group(), stragglar.torch.allreduce_hook)

The state is the "stragglar" group (made once, by every rank: new_group is collective). Each
bucket is averaged in one all_reduce with ReduceOp.AVG, which the core runs exactly like SUM
followed by a division on every rank (no pre-division as in torch's default hook).
"""

# No `from __future__ import annotations`: DDP checks the hook's annotations as objects.
import torch
import torch.distributed as dist


def allreduce_hook(state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: the bucket's average over `state`, a "stragglar" process group (None: the
    default group, as torch's own hooks take it, which must then be a "stragglar" group)."""
    group = state if state is not None else dist.group.WORLD
    backend = dist.get_backend(group)
    if backend != "stragglar":
        raise ValueError(f"stragglar.torch.allreduce_hook: the hook's state is a {backend!r} process group"
                         f"{' (None: the default group)' if state is None else ''}, expected 'stragglar' "
                         f"(model.register_comm_hook(stragglar.torch.new_group(), stragglar.torch.allreduce_hook))")
    work = dist.all_reduce(bucket.buffer(), op=dist.ReduceOp.AVG, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])
