"""torch.distributed's NCCL all_reduce, unmodified, under mpirun with libstragglar_nccl_preload.so
preloaded the way a user would (scripts/gpu-check.sh: LD_PRELOAD and nothing else; docs/preload.md
"NCCL"). Checks every result exactly, and that the preload is loaded and served at least every
call of STRAGGLAR_NCCL_MIN_BYTES (default 1 MiB) or more: a run where nothing went through
stragglar fails."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist

rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")))
n = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1")))
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
device = torch.device("cuda", rank % torch.cuda.device_count())
torch.cuda.set_device(device)
dist.init_process_group("nccl", rank=rank, world_size=n, device_id=device)
min_bytes = os.environ.get("STRAGGLAR_NCCL_MIN_BYTES", str(1 << 20))
wrong = 0
large = 0  # calls the preload must serve
for numel in (1 << 10, 1 << 20, 16 << 20):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        t = torch.full((numel,), rank + 1, dtype=dtype, device=device)
        dist.all_reduce(t)
        torch.cuda.synchronize()
        wrong += int((t != n * (n + 1) // 2).sum().item())
        # A size written other than in plain bytes (1M) only asks for one call served.
        large += t.numel() * t.element_size() >= int(min_bytes) if min_bytes.isdigit() else 0
large = max(large, 1)
try:
    counts = ctypes.CDLL(None).stragglar_nccl_preload_counts
    served, passed = ctypes.c_longlong(), ctypes.c_longlong()
    counts(ctypes.byref(served), ctypes.byref(passed))
    through = f"through stragglar: {served.value} calls, to NCCL: {passed.value}"
except AttributeError:
    served, through = None, "preload not loaded"
dist.destroy_process_group()
ok = wrong == 0 and served is not None and served.value >= large
if rank == 0:
    print(f"torch_allreduce n={n}: {through} (at least {large} expected); wrong {wrong}: "
          f"{'PASSED' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
