"""One rank of the PyTorch job across the namespace testbed (tests/torch/run_across_cluster.sh
starts it under scripts/cluster.sh): the "stragglar" backend on CPU tensors over UCX (TCP between
hosts), a TCPStore on host 0 (STRAGGLAR_CLUSTER_HOST0), rank and world size from Open MPI's
environment (mpirun only starts the processes; nothing here uses MPI).

It runs rank_cases.allreduce_exact (every dtype x op x count, results equal to the float64
reference on every rank) and rank_cases.ddp_training (DDP parameters equal to Gloo's after a few
steps, identical bits on every rank), the same cases the single-host tests run, and exits non-zero
with the failing check's traceback.
"""
import datetime
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.set_num_threads(1)
import stragglar.torch  # noqa: E402,F401  registers the backend

import rank_cases  # noqa: E402

PORT = 29517  # host 0's namespace is private to this run: no other listener there


def main() -> int:
    rank, nranks = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
    host0 = os.environ["STRAGGLAR_CLUSTER_HOST0"]
    dist.init_process_group("stragglar", init_method=f"tcp://{host0}:{PORT}", rank=rank, world_size=nranks,
                            timeout=datetime.timedelta(seconds=60))
    try:
        calls = rank_cases.allreduce_exact(rank, nranks, counts=(1, 1000, 65537),
                                           algorithms=("auto", "stragglar", "ring", "hierarchical"))
        diffs = rank_cases.ddp_training(rank, nranks, steps=4)
    except BaseException:  # noqa: BLE001 - reported with the rank; mpirun ends the others
        print(f"cluster_job: rank {rank} of {nranks} ({os.uname().nodename}) FAILED:\n{traceback.format_exc()}",
              file=sys.stderr, flush=True)
        return 1
    dist.destroy_process_group()
    if rank == 0:
        print(f"cluster_job: {nranks} ranks: {calls} exact all_reduce calls per rank; DDP = Gloo "
              f"(largest parameter difference {max(diffs):.2e})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
