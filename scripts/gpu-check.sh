#!/usr/bin/env bash
# The whole GPU check in one command, build-free (shared/DEVICE.md "Build here, run there").
#
#   scripts/gpu-check.sh [BUILD_DIR]        (default ./build; logs under ${OUT:-./gpu-check-out})
#
# On a machine with one GPU (or more):
#   1. test_cuda_device           reduce kernels × every dtype/op/alignment, bit-exact
#   2. test_nccl_allreduce        N ∈ {2, 4, 8} NCCL ranks sharing the GPU (NCCL_HOSTID per rank,
#                                 sockets over loopback): every algorithm × dtype × op × count,
#                                 in/out of place, straggler 0 and n−1, exact, identical bits
#   3. bench_reduce_kernels       reduce kernel GB/s vs cudaMemcpyAsync D2D
#   4. stragglar-bench-gpu        StragglAR vs ring (our executor) vs ncclAllReduce at 8 ranks,
#                                 64 MiB fp32, straggler 7, delay ${DELAY_MS:-3000} ms
# and prints a short table last, naming the transport. Exit status 0 only if every step passed.
# Knobs: NRANKS_LIST="2 4 8", BENCH_RANKS=8, BENCH_BYTES=64M, DELAY_MS, BENCH_ITERS=5.
set -u
BUILD=${1:-./build}
OUT=${OUT:-./gpu-check-out}
NRANKS_LIST=${NRANKS_LIST:-"2 4 8"}
BENCH_RANKS=${BENCH_RANKS:-8}
BENCH_BYTES=${BENCH_BYTES:-64M}
# Over loopback sockets (~0.25–0.3 GB/s per rank) the ReduceScatter of 64 MiB among 7 ranks
# takes a few hundred ms; the delay must exceed it for the ideal overlap.
DELAY_MS=${DELAY_MS:-3000}
BENCH_ITERS=${BENCH_ITERS:-5}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
status=0

say() { echo "$*" | tee -a "$SUMMARY"; }
for bin in test_cuda_device test_nccl_allreduce bench_reduce_kernels stragglar-bench-gpu; do
  if [ ! -x "$BUILD/$bin" ]; then
    echo "gpu-check: $BUILD/$bin not found: build with -DSTRAGGLAR_CUDA=ON first (cmake --build $BUILD)" >&2
    exit 2
  fi
done

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        -x NCCL_NET=Socket -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo
        -x NCCL_DEBUG=${NCCL_DEBUG:-WARN})
# shared/DEVICE.md: every rank its own NCCL_HOSTID (the programs also set it when ranks > GPUs).
per_rank() { printf 'NCCL_HOSTID=gpucheck$OMPI_COMM_WORLD_RANK exec %s' "$*"; }

{ nvidia-smi -L 2>&1 || echo "nvidia-smi not available"; } | tee "$OUT/gpus.txt"
say "gpu-check: build $BUILD, logs in $OUT, $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# 1. kernels
if "$BUILD/test_cuda_device" >"$OUT/test_cuda_device.log" 2>&1; then
  say "test_cuda_device: $(grep -E '^\[  (PASSED|SKIPPED) \] [0-9]+ test' "$OUT/test_cuda_device.log" | tr '\n' ' ')"
else
  say "test_cuda_device: FAILED (see $OUT/test_cuda_device.log)"; status=1
fi
grep -q "no CUDA device: skipped" "$OUT/test_cuda_device.log" && { say "no CUDA device: the check needs a GPU"; exit 77; }

# 2. NCCL path at N ranks on the one GPU
for n in $NRANKS_LIST; do
  log="$OUT/test_nccl_allreduce_n$n.log"
  timeout 900 "${MPIRUN[@]}" -np "$n" sh -c "$(per_rank "$BUILD/test_nccl_allreduce" all)" >"$log" 2>&1
  rc=$?
  say "test_nccl_allreduce n=$n: rc=$rc $(grep -E '^test_nccl_allreduce n=' "$log" | tail -1)"
  [ $rc -eq 0 ] || status=1
done

# 3. reduce kernel vs copy
if "$BUILD/bench_reduce_kernels" --json "$OUT/bench_reduce_kernels.json" >"$OUT/bench_reduce_kernels.log" 2>&1; then
  cat "$OUT/bench_reduce_kernels.log" | tee -a "$SUMMARY"
else
  say "bench_reduce_kernels: FAILED (see $OUT/bench_reduce_kernels.log)"; status=1
fi

# 4. StragglAR vs ring vs ncclAllReduce under a straggler
bench_log="$OUT/stragglar_bench_gpu.log"
timeout 600 "${MPIRUN[@]}" -np "$BENCH_RANKS" sh -c "$(per_rank "$BUILD/stragglar-bench-gpu" \
  -b "$BENCH_BYTES" -e "$BENCH_BYTES" -d float -o sum --algo stragglar,ring,native \
  --straggler $((BENCH_RANKS - 1)) --delay "$DELAY_MS" -n "$BENCH_ITERS" -w 1 -c 1 --calibrate \
  --json "$OUT/stragglar_bench_gpu.json")" >"$bench_log" 2>&1
rc=$?
[ $rc -eq 0 ] || { say "stragglar-bench-gpu: rc=$rc (see $bench_log)"; status=1; }

# The short table, last.
echo
if command -v python3 >/dev/null && [ -s "$OUT/stragglar_bench_gpu.json" ]; then
  python3 - "$OUT/stragglar_bench_gpu.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
d = json.load(open(sys.argv[1]))
print(f"StragglAR vs ring vs ncclAllReduce: {d['nranks']} ranks, {d['rows'][0]['size'] >> 20} MiB {d['type']} {d['redop']}, "
      f"straggler {d['straggler']}, transport: {d['transport']}")
print(f"{'algo':>10} {'delay(ms)':>10} {'time(ms)':>10} {'exposed(ms)':>12} {'busbw(GB/s)':>12} {'#wrong':>7} {'meas/pred':>10}")
for r in d["rows"]:
    ratio = f"{r['exposed_us'] / r['predicted_exposed_us']:.2f}" if r.get("predicted_exposed_us") else "-"
    print(f"{r['algo']:>10} {r['delay_ms']:>10.1f} {r['time_us']/1e3:>10.2f} {r['exposed_us']/1e3:>12.2f} {r['busbw']:>12.3f} {r['wrong']:>7} {ratio:>10}")
EOF
else
  grep -E '^#|^ +[0-9]' "$bench_log" | tee -a "$SUMMARY"
fi
say "gpu-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED)"
exit $status
