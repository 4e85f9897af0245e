#!/usr/bin/env bash
# The whole GPU check in one command, build-free (shared/DEVICE.md "Build here, run there").
#
#   scripts/gpu-check.sh [BUILD_DIR]        (default ./build; logs under ${OUT:-./gpu-check-out})
#
# On a machine with one GPU (or more), in this order, within BUDGET_S seconds in all (default
# 540: one 10-minute device call with room to spare):
#   1. test_cuda_device         reduce kernels × every dtype/op/alignment, bit-exact (GoogleTest:
#                               must say "[  PASSED  ] N tests" and skip nothing)
#   2. test_nccl_allreduce      at n = 2, then 4, then 8 NCCL ranks sharing the GPU (NCCL_HOSTID
#                               per rank, sockets over loopback; the test cuts its matrix for
#                               n >= 4): every algorithm of the table must have run at every n
#                               (the test's "algorithms run: ... (K of K in the table)" line) and
#                               the run must say PASSED
#   3. test_nccl_allreduce timeout   the first-call agreement's timeout at n = 2
#                               (STRAGGLAR_TIMEOUT_S=3, its own process: it aborts a communicator)
#   4. bench_reduce_kernels     reduce kernel GB/s vs cudaMemcpyAsync D2D
#   5. stragglar-bench-gpu      StragglAR vs ring (our executor) vs ncclAllReduce vs auto at 8
#                               ranks, 64 MiB fp32, straggler 7, delay ${DELAY_MS:-1500} ms
#   6. the NCCL preload (issue #21, docs/preload.md): nccl_preload_check (nccl-tests-like
#                               all_reduce with checking) at 4 ranks plain and under
#                               libstragglar_nccl_preload.so (STRAGGLAR_NCCL_MIN_BYTES=0), then
#                               torch's NCCL all_reduce under it (when torch has CUDA)
# and prints a short table last, naming the transport. Exit status 0 only if every step passed
# and n = 2, 4, 8 all ran; 77 if there is no GPU.
# Knobs: NRANKS_LIST="2 4 8" (anything without all three fails the check), BENCH_RANKS=8,
# BENCH_BYTES=64M, DELAY_MS, BENCH_ITERS=5, BENCH_ALGOS, REQUIRED_ALGOS, BUDGET_S.
set -u
BUILD=${1:-./build}
OUT=${OUT:-./gpu-check-out}
NRANKS_LIST=${NRANKS_LIST:-"2 4 8"}
REQUIRED_ALGOS=${REQUIRED_ALGOS:-"stragglar ring rhd allpairs broadcast native auto"}
BENCH_RANKS=${BENCH_RANKS:-8}
BENCH_BYTES=${BENCH_BYTES:-64M}
BENCH_ALGOS=${BENCH_ALGOS:-stragglar,ring,native,auto}
# Over loopback sockets (~0.25 GB/s per rank) StragglAR's ReduceScatter of 64 MiB among 7 ranks
# takes a few hundred ms; the delay must exceed it for the ideal overlap.
DELAY_MS=${DELAY_MS:-1500}
BENCH_ITERS=${BENCH_ITERS:-5}
BUDGET_S=${BUDGET_S:-540}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
status=0
START=$SECONDS

say() { echo "$*" | tee -a "$SUMMARY"; }
fail() { say "FAIL: $*"; status=1; }
# The time a step may take: its own limit, capped by what is left of the budget.
limit() {
  local left=$((BUDGET_S - (SECONDS - START) - 5))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
# Runs a step under `timeout`; a step that finds no budget left is not run.
step() {
  local secs=$1; shift
  if [ "$secs" -le 5 ]; then echo "out of time (BUDGET_S=$BUDGET_S)"; return 124; fi
  timeout --kill-after=10 "$secs" "$@"
}

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
say "gpu-check: build $BUILD, logs in $OUT, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET_S} s"

# 1. kernels
log="$OUT/test_cuda_device.log"
step "$(limit 120)" "$BUILD/test_cuda_device" >"$log" 2>&1
rc=$?
if grep -q "no CUDA device: skipped" "$log"; then
  say "no CUDA device: the check needs a GPU ($(grep -m1 'no CUDA device' "$log"))"
  exit 77
fi
passed=$(grep -E '^\[  PASSED  \] [0-9]+ tests?' "$log" | tail -1)
skipped=$(grep -E '^\[  SKIPPED \] [0-9]+ tests?' "$log" | tail -1)
if [ $rc -eq 0 ] && [ -n "$passed" ] && [ -z "$skipped" ]; then
  say "test_cuda_device: $passed ($((SECONDS - START)) s)"
else
  fail "test_cuda_device: rc=$rc, '${passed:-no PASSED line}'${skipped:+, $skipped} (see $log)"
fi

# 2. the NCCL front-end at n ranks on the one GPU, smallest n first
for need in 2 4 8; do
  case " $NRANKS_LIST " in *" $need "*) ;; *) fail "NRANKS_LIST='$NRANKS_LIST' leaves out n = $need";; esac
done
for n in $NRANKS_LIST; do
  log="$OUT/test_nccl_allreduce_n$n.log"
  t0=$SECONDS
  step "$(limit 240)" "${MPIRUN[@]}" -np "$n" sh -c "$(per_rank "$BUILD/test_nccl_allreduce" all)" >"$log" 2>&1
  rc=$?
  ran=$(grep -E "^test_nccl_allreduce n=$n: algorithms run:" "$log" | tail -1)
  verdict=$(grep -E "^test_nccl_allreduce n=$n all: .*: PASSED$" "$log" | tail -1)
  say "test_nccl_allreduce n=$n: rc=$rc, $((SECONDS - t0)) s: ${ran#*: }"
  [ $rc -eq 0 ] && [ -n "$verdict" ] || fail "test_nccl_allreduce n=$n did not pass (see $log)"
  # Every algorithm of the table ran (K of K), and the table has every required algorithm.
  if [[ "$ran" =~ \(([0-9]+)\ of\ ([0-9]+)\ in\ the\ table\) ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
    for a in $REQUIRED_ALGOS; do
      case " ${ran#*algorithms run: } " in *" $a "*) ;; *) fail "test_nccl_allreduce n=$n: $a did not run";; esac
    done
  else
    fail "test_nccl_allreduce n=$n: not every algorithm of the table ran (${ran:-no 'algorithms run' line})"
  fi
done

# 3. the agreement's timeout (rank 0 never calls), its own process
log="$OUT/test_nccl_timeout_n2.log"
t0=$SECONDS
step "$(limit 90)" "${MPIRUN[@]}" -x STRAGGLAR_TIMEOUT_S=3 -np 2 sh -c "$(per_rank "$BUILD/test_nccl_allreduce" timeout)" \
  >"$log" 2>&1
rc=$?
verdict=$(grep -E '^test_nccl_allreduce n=2 timeout: .*: PASSED$' "$log" | tail -1)
say "test_nccl_allreduce timeout n=2: rc=$rc, $((SECONDS - t0)) s"
[ $rc -eq 0 ] && [ -n "$verdict" ] || fail "the timeout test did not pass (see $log)"

# 4. reduce kernel vs copy
log="$OUT/bench_reduce_kernels.log"
if step "$(limit 60)" "$BUILD/bench_reduce_kernels" --json "$OUT/bench_reduce_kernels.json" >"$log" 2>&1; then
  tee -a "$SUMMARY" <"$log"
else
  fail "bench_reduce_kernels (see $log)"
fi

# 5. StragglAR vs ring vs ncclAllReduce vs auto under a straggler
log="$OUT/stragglar_bench_gpu.log"
t0=$SECONDS
step "$(limit 300)" "${MPIRUN[@]}" -np "$BENCH_RANKS" sh -c "$(per_rank "$BUILD/stragglar-bench-gpu" \
  -b "$BENCH_BYTES" -e "$BENCH_BYTES" -d float -o sum --algo "$BENCH_ALGOS" \
  --straggler $((BENCH_RANKS - 1)) --delay "$DELAY_MS" -n "$BENCH_ITERS" -w 1 -c 1 --calibrate \
  --json "$OUT/stragglar_bench_gpu.json")" >"$log" 2>&1
rc=$?
say "stragglar-bench-gpu: rc=$rc, $((SECONDS - t0)) s"
[ $rc -eq 0 ] || fail "stragglar-bench-gpu: rc=$rc (see $log)"

# 6. the NCCL preload library: an unmodified NCCL program and torch's ProcessGroupNCCL under it
preload_lib="$BUILD/libstragglar_nccl_preload.so"
if [ -x "$BUILD/nccl_preload_check" ] && [ -f "$preload_lib" ]; then
  preload_lib=$(readlink -f "$preload_lib")
  for mode in plain expect-preload; do
    log="$OUT/nccl_preload_check_$mode.log"
    pre=()
    [ "$mode" = expect-preload ] && pre=(-x LD_PRELOAD="$preload_lib" -x STRAGGLAR_NCCL_MIN_BYTES=0 -x STRAGGLAR_DEBUG=INFO)
    t0=$SECONDS
    step "$(limit 120)" "${MPIRUN[@]}" "${pre[@]}" -np 4 sh -c "$(per_rank "$BUILD/nccl_preload_check" $mode)" >"$log" 2>&1
    rc=$?
    verdict=$(grep -E "^nccl_preload_check n=4 .*: PASSED$" "$log" | tail -1)
    say "nccl_preload_check $mode n=4: rc=$rc, $((SECONDS - t0)) s $(grep -m1 'through stragglar' "$log")"
    [ $rc -eq 0 ] && [ -n "$verdict" ] || fail "nccl_preload_check $mode did not pass (see $log)"
  done
  if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    log="$OUT/torch_allreduce_preload.log"
    t0=$SECONDS
    step "$(limit 180)" "${MPIRUN[@]}" -x LD_PRELOAD="$preload_lib" -x STRAGGLAR_NCCL_MIN_BYTES=0 -np 4 \
      sh -c "$(per_rank python3 "$(dirname "$0")/../tests/nccl_preload/torch_allreduce.py")" >"$log" 2>&1
    rc=$?
    say "torch NCCL all_reduce under the preload: rc=$rc, $((SECONDS - t0)) s: $(grep -m1 '^torch_allreduce' "$log")"
    [ $rc -eq 0 ] && grep -q '^torch_allreduce.*PASSED$' "$log" || fail "torch all_reduce under the preload (see $log)"
  else
    say "torch NCCL all_reduce under the preload: skipped (no torch with CUDA)"
  fi
else
  fail "the NCCL preload was not built ($BUILD/nccl_preload_check, $preload_lib)"
fi

# The short table, last.
echo
if command -v python3 >/dev/null && [ -s "$OUT/stragglar_bench_gpu.json" ]; then
  python3 - "$OUT/stragglar_bench_gpu.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["rows"] if "error" not in r]
size = rows[0]["bytes"] >> 20 if rows else 0
print(f"StragglAR vs ring vs ncclAllReduce vs auto: {d['nranks']} ranks, {size} MiB {d['type']} {d['redop']}, "
      f"straggler {d['straggler']}, transport: {d['transport']}")
print(f"{'algo':>10} {'K':>3} {'delay(ms)':>10} {'time(ms)':>10} {'exposed(ms)':>12} {'busbw(GB/s)':>12} {'#wrong':>7} {'meas/pred':>10}")
for r in d["rows"]:
    if "error" in r:
        print(f"{r['algo']:>10} error: {r['error']}")
        continue
    ratio = f"{r['exposed_us'] / r['predicted_exposed_us']:.2f}" if r.get("predicted_exposed_us") else "-"
    print(f"{r['algo']:>10} {r['pipeline']:>3} {r['delay_ms']:>10.1f} {r['time_us']/1e3:>10.2f} {r['exposed_us']/1e3:>12.2f} "
          f"{r['busbw']:>12.3f} {str(r['wrong']):>7} {ratio:>10}")
    if r["algo"].startswith("auto"):
        print(f"{'':>10} auto ran: " + ", ".join(f"{c['algo']}" + (f"({c['straggler']})" if c['straggler'] >= 0 else "")
                                                for c in r["choices"]))
EOF
else
  grep -E '^#|^ +[0-9]' "$log" | tee -a "$SUMMARY"
fi
say "gpu-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $((SECONDS - START)) s"
exit $status
