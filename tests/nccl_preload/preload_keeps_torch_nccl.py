"""With LD_PRELOAD=libstragglar_nccl_preload.so, `import torch` works and the process keeps
torch's own libnccl (the nvidia-nccl wheel's), not the NCCL the preload was built against; the
preload's calls go to torch's NCCL and its group depth follows ncclGroupStart / ncclGroupEnd /
ncclGroupSimulateEnd. No GPU needed.

    preload_keeps_torch_nccl.py PRELOAD BUILD_NCCL

Exit 0 when all holds, 1 otherwise, 77 (skipped, with the reason) when torch is not installed or
brings no NCCL (a CPU-only build)."""
import os
import subprocess
import sys

# Runs in a child: import torch, then report the libnccl files mapped and, when the preload is
# there, what it says.
PROBE = r"""
import ctypes, os, sys
import torch
mapped = sorted({os.path.realpath(line.split(None, 5)[5].strip())
                 for line in open("/proc/self/maps") if "libnccl" in line and "/" in line})
print("MAPPED", *mapped, sep="\t")
lib = ctypes.CDLL(None)
try:
    where = lib.stragglar_nccl_preload_nccl_library
except AttributeError:
    sys.exit(0)
where.restype = ctypes.c_char_p
print("PRELOAD_NCCL", os.path.realpath(where().decode()) if where() else "none", sep="\t")
depth = lib.stragglar_nccl_preload_group_depth
class SimInfo(ctypes.Structure):  # ncclSimInfo_t, NCCL_SIM_INFO_INITIALIZER
    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("estimatedTime", ctypes.c_float)]
steps = []
lib.ncclGroupStart(); steps.append(depth())
lib.ncclGroupEnd(); steps.append(depth())
lib.ncclGroupStart(); lib.ncclGroupStart(); steps.append(depth())
code = ctypes.c_int()
ctypes.CDLL(mapped[0]).ncclGetVersion(ctypes.byref(code))  # torch's NCCL is not global
sim = SimInfo(ctypes.sizeof(SimInfo), 0x74685283, code.value, float("nan"))
lib.ncclGroupSimulateEnd(ctypes.byref(sim)); steps.append(depth())
lib.ncclGroupSimulateEnd(ctypes.byref(sim)); steps.append(depth())
print("DEPTHS", *steps, sep="\t")
"""


def probe(env):
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    fields = {}
    for line in r.stdout.splitlines():
        key, *values = line.split("\t")
        fields[key] = values
    return r, fields


def main():
    preload, build_nccl = os.path.realpath(sys.argv[1]), os.path.realpath(sys.argv[2])
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    plain, seen = probe(env)
    if plain.returncode != 0:
        print(f"skipped: torch is not installed here ({plain.stderr.strip().splitlines()[-1:]})")
        return 77
    torch_nccl = seen.get("MAPPED", [])
    if not torch_nccl:
        print("skipped: this torch brings no NCCL (a CPU-only build)")
        return 77
    print(f"torch alone maps: {' '.join(torch_nccl)}; the preload was built against {build_nccl}")

    r, got = probe(dict(env, LD_PRELOAD=preload))
    failures = []
    if r.returncode != 0:
        failures.append(f"import torch (or the probe after it) failed under the preload (rc {r.returncode}): "
                        f"{r.stderr.strip()[-600:]}")
    else:
        mapped = got.get("MAPPED", [])
        if mapped != torch_nccl:
            failures.append(f"under the preload libnccl mapped is {mapped}, torch alone maps {torch_nccl}")
        if build_nccl not in torch_nccl and build_nccl in mapped:
            failures.append(f"the build's NCCL {build_nccl} is mapped")
        where = got.get("PRELOAD_NCCL", ["preload not loaded"])[0]
        if where not in torch_nccl:
            failures.append(f"the preload's calls go to {where}, not torch's NCCL")
        depths = got.get("DEPTHS", [])
        if depths != ["1", "0", "2", "1", "0"]:
            failures.append(f"group depth after Start, End, Start x2, SimulateEnd x2: {depths}, expected 1 0 2 1 0")
        print(f"under the preload: mapped {' '.join(mapped)}; calls go to {where}; depths {' '.join(depths)}")
    for f in failures:
        print(f"FAIL: {f}")
    print(f"preload_keeps_torch_nccl: {'FAILED' if failures else 'PASSED'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
