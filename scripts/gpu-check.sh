#!/usr/bin/env bash
# The whole GPU check in one device call (docs/gpu.md "First run: the check in one device call").
#
#   scripts/gpu-bundle.sh build-bundle          # here: build what the check runs (≈ 20 MiB)
#   bash scripts/gpu-check.sh build-bundle      # there, in the repository root (logs: ${OUT:-./gpu-check-out})
#
# What comes back from a device call's $OUT is at most 8 files: the check leaves four there,
# summary.txt, stragglar_bench_gpu.json, round_costs.json and gpu-check-logs.tar.gz (every log,
# packed on exit);
# a failing step also prints its log's last lines before the table.
#
# DIR is a bundle (DIR/bin/...) or a build folder with the programs at its top. Steps (STEPS
# names them), each under its own time limit (at least 1.5 × its time on the H100, docs/gpu.md)
# and all within BUDGET_S (default 480 s: the check must fit a device call's 10 minutes):
#   0. the PyTorch module, built in the background from DIR/torch against the device's own torch
#      and Python (tests/gpu/torch_module) while the first steps run (only with step torch)
#   kernels  test_cuda_device: reduce kernels, every dtype × op × offset pair up to the unrolled
#            vector loop, raw special bits against the CPU device (GoogleTest: all PASSED, none skipped)
#   nccl2, nccl4, nccl8  test_nccl_allreduce at n = 2, 4, 8 NCCL ranks sharing the GPU
#            (NCCL_HOSTID per rank, sockets over loopback): every algorithm of the table must run
#   timeout  at n = 2, STRAGGLAR_TIMEOUT_S=3: a rank 7.5 s late to a later auto call is waited for
#            (every call succeeds); the first-call timeout fires within [0.9, 2] × 3 s
#   torch    tests/torch/test_cuda.py (1-GPU in-process, 2 ranks on the one GPU: all_reduce of
#            every dtype × op, a DDP step): none may skip
#   kbench   bench_reduce_kernels: every row's result right, and every sum at every alignment at
#            least KERNEL_GOAL (0.80) of the D2D copy's bandwidth
#   bench    stragglar-bench-gpu: StragglAR vs ring vs ncclAllReduce vs auto, 8 ranks, straggler delayed
#   preload  the NCCL preload as a user runs it (LD_PRELOAD, nothing else): import torch keeps
#            torch's NCCL; a program keeps the system's; nccl_preload_check at 4 ranks plain and
#            preloaded (calls served, the grouped and int8 ones passed on); torch's ProcessGroupNCCL
#            all_reduce preloaded (calls served)
#   rounds   bench_nccl_rounds, 8 ranks: the executor's host enqueue time per round at n = 2..8,
#            1 KiB..256 MiB, StragglAR and ring (the simulator's GPU model, docs/gpu.md): every
#            point measured, every result exact; $OUT/round_costs.json. Last: a full check that
#            runs out of budget stops it at its deadline with a partial table (rerun STEPS=rounds)
# Prints the bench's table, then the table of steps last. Exit 0 only if every step of STEPS ran
# and passed; 77 if there is no GPU; 2 if DIR lacks the programs or STEPS names an unknown step.
# Knobs: STEPS (default all, in the order above; e.g. STEPS="kernels kbench" to rerun two),
# BUDGET_S, BENCH_RANKS=8, BENCH_BYTES=32M, DELAY_MS=800, BENCH_ITERS=24 (issue 20's 24 calls:
# auto's first calls count), BENCH_ALGOS, REQUIRED_ALGOS, KERNEL_GOAL=0.80, ROUNDS_NRANKS=2-8,
# ROUNDS_SIZES (default 1K..256M, powers of 4), ROUNDS_ALGOS=stragglar,ring, PYTHON=python3,
# TORCH_BUILD (default DIR/torch/build), TORCH_BUILD_S=240 (configure + build of the module),
# SKIP_TORCH=1 (then the check cannot pass).
set -u
DIR=${1:-./build}
OUT=${OUT:-./gpu-check-out}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ALL_STEPS="kernels nccl2 nccl4 nccl8 timeout torch kbench bench preload rounds"
STEPS=${STEPS:-$ALL_STEPS}
for st in $STEPS; do
  case " $ALL_STEPS " in *" $st "*) ;; *) echo "gpu-check: unknown step '$st' in STEPS (steps: $ALL_STEPS)" >&2; exit 2;; esac
done
want() { case " $STEPS " in *" $1 "*) return 0;; esac; return 1; }
KERNEL_GOAL=${KERNEL_GOAL:-0.80}
REQUIRED_ALGOS=${REQUIRED_ALGOS:-"stragglar ring rhd allpairs broadcast native auto"}
BENCH_RANKS=${BENCH_RANKS:-8}
BENCH_BYTES=${BENCH_BYTES:-32M}
BENCH_ALGOS=${BENCH_ALGOS:-stragglar,ring,native,auto}
# Over loopback sockets (~0.25 GB/s per rank) StragglAR's ReduceScatter of 32 MiB among 7 ranks
# takes ~150 ms; the delay must exceed it for the ideal overlap.
DELAY_MS=${DELAY_MS:-800}
BENCH_ITERS=${BENCH_ITERS:-24}
BUDGET_S=${BUDGET_S:-480}
ROUNDS_NRANKS=${ROUNDS_NRANKS:-2-8}
ROUNDS_SIZES=${ROUNDS_SIZES:-1K,4K,16K,64K,256K,1M,4M,16M,64M,256M}
ROUNDS_ALGOS=${ROUNDS_ALGOS:-stragglar,ring}
PYTHON=${PYTHON:-python3}
status=0
START=$SECONDS
ROWS=()  # the table of steps: "step|result|seconds|detail"

say() { echo "$*" | tee -a "$SUMMARY"; }
row() {  # step result seconds detail [log]; a result other than PASS fails the check
  ROWS+=("$1|$2|$3|$4")
  say "$1: $2 ($3 s) $4"
  if [ "$2" != PASS ]; then
    status=1
    # Its log's first failures and last lines, here: the call's output may be all a session reads.
    if [ -n "${5:-}" ] && [ -s "$5" ]; then
      { grep -m 6 -E 'FAIL|[Ee]rror|[Aa]bort|hung|[Tt]imeout|Traceback' "$5"; echo ...; tail -n 5 "$5"; } |
        cut -c1-200 | sed 's/^/    | /'
    fi
  fi
}
# The time a step may take: its own limit, capped by what is left of the budget.
limit() {
  local left=$((BUDGET_S - (SECONDS - START) - 5))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
# Runs a step under `timeout`; a step that finds no budget left is not run (rc 124).
step() {
  local secs=$1; shift
  if [ "$secs" -le 5 ]; then echo "out of time (BUDGET_S=$BUDGET_S)"; return 124; fi
  timeout --kill-after=10 "$secs" "$@"
}

if [ -x "$DIR/bin/test_cuda_device" ]; then BIN=$(cd "$DIR/bin" && pwd); else BIN=$(cd "$DIR" 2>/dev/null && pwd); fi
for bin in test_cuda_device test_nccl_allreduce bench_reduce_kernels stragglar-bench-gpu nccl_preload_check \
           preload_keeps_program_nccl libstragglar_nccl_preload.so bench_nccl_rounds; do
  if [ -z "$BIN" ] || [ ! -f "$BIN/$bin" ]; then
    echo "gpu-check: $DIR/bin/$bin (or $DIR/$bin) not found: make a bundle first (scripts/gpu-bundle.sh $DIR)" >&2
    exit 2
  fi
done

mkdir -p "$OUT/logs"
OUT=$(cd "$OUT" && pwd)
LOGS="$OUT/logs"
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
# A device call brings back at most 8 files from $OUT: the logs go back as one archive.
pack_logs() {
  if [ -d "$LOGS" ] && tar -czf "$OUT/gpu-check-logs.tar.gz" -C "$OUT" logs 2>/dev/null; then rm -rf "$LOGS"; fi
}
trap pack_logs EXIT
trap 'exit 143' TERM INT  # so that the EXIT trap packs the logs of a check stopped from outside

MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none
        -x NCCL_NET=Socket -x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo
        -x NCCL_DEBUG=${NCCL_DEBUG:-WARN})
# NCCL refuses two ranks of one communicator on one GPU: every rank its own NCCL_HOSTID
# (docs/gpu.md "Tests"; the programs also set it when ranks > GPUs).
per_rank() { printf 'NCCL_HOSTID=gpucheck$OMPI_COMM_WORLD_RANK exec %s' "$*"; }

{ command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 || echo "nvidia-smi not available"; } >"$LOGS/gpus.txt"
say "gpu-check: $DIR ($(head -2 "$DIR/MANIFEST.txt" 2>/dev/null | tail -1)), logs in $OUT, $(date -u +%Y-%m-%dT%H:%M:%SZ), budget ${BUDGET_S} s"
say "steps: $STEPS$([ "$STEPS" = "$ALL_STEPS" ] || echo " (a subset: a pass says nothing of the others)")"
say "GPU: $(head -1 "$LOGS/gpus.txt")"

# kernels (first: it says whether there is a GPU at all; without it, one short test says so)
log="$LOGS/test_cuda_device.log"
t0=$SECONDS
if want kernels; then
  step "$(limit 120)" "$BIN/test_cuda_device" >"$log" 2>&1
else
  step "$(limit 60)" "$BIN/test_cuda_device" --gtest_filter=CudaDevice.CopyIsStreamOrdered >"$log" 2>&1
fi
rc=$?
if grep -q "no CUDA device: skipped" "$log"; then
  say "no CUDA device: the check needs a GPU ($(grep -m1 'no CUDA device' "$log"))"
  exit 77
fi

# 0. the torch module, in the background from here on (the device has 16 cores). Configure and
# build share one limit, so that waiting for it cannot push the check past its budget (the
# device call's own limit would then kill the check before its table). The folder is absolute:
# the tests' spawned ranks find the module through PYTHONPATH.
TORCH_BUILD=${TORCH_BUILD:-$DIR/torch/build}
TORCH_BUILD_S=${TORCH_BUILD_S:-240}
torch_pid=""
if [ "${SKIP_TORCH:-0}" = 1 ] || ! want torch; then
  :
elif [ -f "$DIR/torch/lib/libstragglar_nccl.a" ]; then
  mkdir -p "$TORCH_BUILD" && TORCH_BUILD=$(cd "$TORCH_BUILD" && pwd)
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  build_limit=$(limit "$TORCH_BUILD_S")
  ( t=$SECONDS
    timeout "$build_limit" cmake -S "$ROOT/tests/gpu/torch_module" -B "$TORCH_BUILD" "${gen[@]}" \
        -DSTRAGGLAR_PREBUILT="$(cd "$DIR/torch" && pwd)" -DSTRAGGLAR_PYTHON="$(command -v "$PYTHON")" &&
      timeout $((build_limit - (SECONDS - t) > 1 ? build_limit - (SECONDS - t) : 1)) \
        cmake --build "$TORCH_BUILD" -j "$(nproc)"
    rc=$?; echo "torch module build: rc=$rc$([ $rc = 124 ] && echo " (over its ${build_limit} s)"), $((SECONDS - t)) s"
    exit $rc ) >"$LOGS/torch_module_build.log" 2>&1 &
  torch_pid=$!
fi

if ! want kernels && [ $rc -ne 0 ]; then
  row "GPU probe (test_cuda_device, one test)" FAIL $((SECONDS - t0)) "rc=$rc (see ${log#$OUT/})" "$log"
fi
if want kernels; then
  passed=$(grep -E '^\[  PASSED  \] [0-9]+ tests?' "$log" | tail -1)
  skipped=$(grep -E '^\[  SKIPPED \] [0-9]+ tests?' "$log" | tail -1)
  if [ $rc -eq 0 ] && [ -n "$passed" ] && [ -z "$skipped" ]; then
    row "kernels bit-exact (test_cuda_device)" PASS $((SECONDS - t0)) "${passed#*] }"
  else
    row "kernels bit-exact (test_cuda_device)" FAIL $((SECONDS - t0)) "rc=$rc, '${passed:-no PASSED line}'${skipped:+, $skipped} (see ${log#$OUT/})" "$log"
  fi
fi

# nccl2, nccl4, nccl8: the NCCL front-end at n ranks on the one GPU, smallest n first. Limits:
# 1.5 × the H100's 12 / 32 / 115 s or more.
for n in 2 4 8; do
  want "nccl$n" || continue
  log="$LOGS/test_nccl_allreduce_n$n.log"
  t0=$SECONDS
  case $n in 2) lim=90;; 4) lim=100;; *) lim=180;; esac
  step "$(limit $lim)" "${MPIRUN[@]}" -np "$n" sh -c "$(per_rank "$BIN/test_nccl_allreduce" all)" >"$log" 2>&1
  rc=$?
  ran=$(grep -E "^test_nccl_allreduce n=$n: algorithms run:" "$log" | tail -1)
  verdict=$(grep -E "^test_nccl_allreduce n=$n all: .*: PASSED$" "$log" | tail -1)
  why=""
  [ $rc -eq 0 ] && [ -n "$verdict" ] || why="did not pass: rc=$rc (see ${log#$OUT/})"
  # Every algorithm of the table ran (K of K), and the table has every required algorithm.
  if [[ "$ran" =~ \(([0-9]+)\ of\ ([0-9]+)\ in\ the\ table\) ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
    for a in $REQUIRED_ALGOS; do
      case " ${ran#*algorithms run: } " in *" $a "*) ;; *) why="$why; $a did not run";; esac
    done
  else
    why="$why; not every algorithm of the table ran (${ran:-no 'algorithms run' line})"
  fi
  if [ -z "$why" ]; then
    row "every algorithm exact, NCCL n=$n" PASS $((SECONDS - t0)) "$(echo "$verdict" | sed -E 's/^.*: ([0-9]+ checks).*/\1/'): ${ran#*algorithms run: }"
  else
    row "every algorithm exact, NCCL n=$n" FAIL $((SECONDS - t0)) "${why#; }" "$log"
  fi
done

# timeout: a rank late by 2.5 timeouts in a later auto call, then the agreement's timeout (rank
# 0 never calls), its own process
if want timeout; then
  log="$LOGS/test_nccl_timeout_n2.log"
  t0=$SECONDS
  step "$(limit 60)" "${MPIRUN[@]}" -x STRAGGLAR_TIMEOUT_S=3 -np 2 sh -c "$(per_rank "$BIN/test_nccl_allreduce" timeout)" \
    >"$log" 2>&1
  rc=$?
  verdict=$(grep -E '^test_nccl_allreduce n=2 timeout: .*: PASSED$' "$log" | tail -1)
  fired=$(grep -oE 'the first call failed after [0-9.]+ s' "$log" | head -1)
  late=$(grep -oE 'late: rank 0 came [0-9.]+ s late[^(]*' "$log" | head -1)
  if [ $rc -eq 0 ] && [ -n "$verdict" ]; then
    row "late rank waited; first-call timeout (3 s), n=2" PASS $((SECONDS - t0)) "${late:+$late; }${fired:-fired}"
  else
    row "late rank waited; first-call timeout (3 s), n=2" FAIL $((SECONDS - t0)) "rc=$rc ${fired} (see ${log#$OUT/})" "$log"
  fi
fi

# torch: the CUDA tests, with the module built in step 0
if want torch; then
  log="$LOGS/torch_cuda_tests.log"
  t0=$SECONDS
  if [ -z "$torch_pid" ]; then
    row "torch CUDA (1 GPU; 2 ranks on it; DDP)" FAIL 0 "not run: $([ "${SKIP_TORCH:-0}" = 1 ] && echo SKIP_TORCH=1 || echo "$DIR/torch missing (no torch where the bundle was made)")"
  elif ! wait "$torch_pid"; then
    row "torch CUDA (1 GPU; 2 ranks on it; DDP)" FAIL $((SECONDS - t0)) "the module did not build (see logs/torch_module_build.log)" "$LOGS/torch_module_build.log"
  else
    PYTHONPATH="$TORCH_BUILD/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1 \
      step "$(limit 180)" "$PYTHON" "$ROOT/tests/gpu/run_torch_cuda_tests.py" >"$log" 2>&1
    rc=$?
    verdict=$(grep -E '^torch CUDA tests: [0-9]+ of [0-9]+ passed' "$log" | tail -1)
    built=$(grep -oE 'torch module build: .*' "$LOGS/torch_module_build.log" | tail -1)
    if [ $rc -eq 0 ]; then
      row "torch CUDA (1 GPU; 2 ranks on it; DDP)" PASS $((SECONDS - t0)) "${verdict#torch CUDA tests: } (${built#torch module build: })"
    else
      row "torch CUDA (1 GPU; 2 ranks on it; DDP)" FAIL $((SECONDS - t0)) "rc=$rc, ${verdict:-no verdict} (see ${log#$OUT/})" "$log"
    fi
  fi
fi

# kbench: the reduce kernel against a D2D copy — every row right, every sum row (every dtype,
# every alignment) at KERNEL_GOAL of the copy's bandwidth or more.
if want kbench; then
  log="$LOGS/bench_reduce_kernels.log"
  t0=$SECONDS
  step "$(limit 90)" "$BIN/bench_reduce_kernels" --json "$LOGS/bench_reduce_kernels.json" >"$log" 2>&1
  rc=$?
  verdict=$(python3 - "$LOGS/bench_reduce_kernels.json" "$KERNEL_GOAL" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
goal = float(sys.argv[2])
rows = d["rows"]
wrong = [f"{r['type']} {r['op']} {r['layout']}" for r in rows if not r.get("correct")]
sums = [r for r in rows if r["op"] == "sum"]
slow = [f"{r['type']} {r['layout']} {r['ratio']:.2f}" for r in sums if r["ratio"] < goal]
worst = min(sums, key=lambda r: r["ratio"]) if sums else None
print(f"{len(rows)} rows, {len(wrong)} wrong{': ' + ', '.join(wrong[:4]) if wrong else ''}; lowest sum ratio "
      + (f"{worst['ratio']:.3f} ({worst['type']} {worst['layout']})" if worst else "none")
      + (f"; below {goal}: {', '.join(slow[:6])}" if slow else ""))
sys.exit(1 if wrong or slow or not sums else 0)
EOF
)
  vrc=$?
  if [ $rc -eq 0 ] && [ $vrc -eq 0 ]; then
    row "reduce kernel vs D2D copy (>= $KERNEL_GOAL)" PASS $((SECONDS - t0)) "$verdict"
  else
    row "reduce kernel vs D2D copy (>= $KERNEL_GOAL)" FAIL $((SECONDS - t0)) "rc=$rc, ${verdict:-no JSON} (table in ${log#$OUT/})" "$log"
  fi
fi

# bench: StragglAR vs ring vs ncclAllReduce vs auto under a straggler (not indented: a here-document)
if want bench; then
log="$LOGS/stragglar_bench_gpu.log"
t0=$SECONDS
step "$(limit 200)" "${MPIRUN[@]}" -np "$BENCH_RANKS" sh -c "$(per_rank "$BIN/stragglar-bench-gpu" \
  -b "$BENCH_BYTES" -e "$BENCH_BYTES" -d float -o sum --algo "$BENCH_ALGOS" \
  --straggler $((BENCH_RANKS - 1)) --delay "$DELAY_MS" -n "$BENCH_ITERS" -w 1 -c 1 --calibrate \
  --json "$OUT/stragglar_bench_gpu.json")" >"$log" 2>&1
rc=$?
bench_ok=0
[ $rc -eq 0 ] && [ -s "$OUT/stragglar_bench_gpu.json" ] && bench_ok=1

echo
if [ $bench_ok = 1 ] && command -v python3 >/dev/null; then
  python3 - "$OUT/stragglar_bench_gpu.json" "$BENCH_ALGOS" <<'EOF' | tee -a "$SUMMARY"
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
by_algo = {r["algo"]: r for r in rows}
if "auto" in by_algo and "native" in by_algo:
    print(f"auto / ncclAllReduce, exposed time over the {len(by_algo['auto']['exposed_us_per_iter'])} timed calls: "
          f"{by_algo['auto']['exposed_us'] / by_algo['native']['exposed_us']:.3f}")
wrong = sum(1 for r in rows if r.get("wrong"))
unchecked = sum(1 for r in rows if r.get("wrong") is None)  # -c 0, or a row that failed
missing = [a for a in sys.argv[2].split(",") if a and a not in {r["algo"] for r in rows}]
print(f"bench rows: {len(d['rows'])}, with errors: {len(d['rows']) - len(rows)}, with wrong results: {wrong}, "
      f"unchecked: {unchecked}" + (f"; no row for: {', '.join(missing)}" if missing else ""))
sys.exit(1 if wrong or unchecked or missing or len(rows) != len(d["rows"]) or not rows else 0)
EOF
  [ "${PIPESTATUS[0]}" = 0 ] || bench_ok=0
fi
transport=$(grep -oE '"transport": *"[^"]*"' "$OUT/stragglar_bench_gpu.json" 2>/dev/null | head -1 | sed -E 's/.*: *"(.*)"/\1/')
if [ $bench_ok = 1 ]; then
  row "bench, $BENCH_RANKS ranks, straggler delayed" PASS $((SECONDS - t0)) "${transport:-transport ?}"
else
  row "bench, $BENCH_RANKS ranks, straggler delayed" FAIL $((SECONDS - t0)) "rc=$rc, $(grep '^bench rows:' "$SUMMARY" | tail -1 || echo 'no JSON') (see ${log#$OUT/})" "$log"
fi
fi  # bench

# preload: the NCCL preload as a user runs it — LD_PRELOAD and nothing else (docs/preload.md
# "NCCL", docs/gpu.md "The NCCL preload"): first which NCCL a process keeps under it, then an
# unmodified nccl-tests-like program plain and preloaded (large calls served, grouped and int8
# ones passed on), then torch's own ProcessGroupNCCL all_reduce preloaded (calls served).
if want preload; then
  preload_lib="$BIN/libstragglar_nccl_preload.so"
  log="$LOGS/preload_keeps_nccl.log"
  t0=$SECONDS
  sys_nccl=$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF; exit}')
  { step "$(limit 30)" env LD_PRELOAD="$preload_lib" "$BIN/preload_keeps_program_nccl"; echo "program: rc=$?"
    step "$(limit 120)" "$PYTHON" "$ROOT/tests/nccl_preload/preload_keeps_torch_nccl.py" "$preload_lib" \
      "${sys_nccl:-/no/system/libnccl}"; echo "torch: rc=$?"; } >"$log" 2>&1
  if grep -q '^program: rc=0$' "$log" && grep -q '^torch: rc=0$' "$log"; then
    row "NCCL preload keeps the process's NCCL" PASS $((SECONDS - t0)) "program: system NCCL; import torch: torch's own"
  else
    row "NCCL preload keeps the process's NCCL" FAIL $((SECONDS - t0)) "$(grep -E '^(program|torch): rc=' "$log" | tr '\n' ' ')(77: torch missing; see ${log#$OUT/})" "$log"
  fi
  for mode in plain expect-preload; do
    log="$LOGS/nccl_preload_check_$mode.log"
    pre=()
    [ "$mode" = expect-preload ] && pre=(-x LD_PRELOAD="$preload_lib")
    t0=$SECONDS
    step "$(limit 90)" "${MPIRUN[@]}" "${pre[@]}" -np 4 sh -c "$(per_rank "$BIN/nccl_preload_check" $mode)" >"$log" 2>&1
    rc=$?
    verdict=$(grep -E "^nccl_preload_check n=4 .*: PASSED$" "$log" | tail -1)
    if [ $rc -eq 0 ] && [ -n "$verdict" ]; then
      row "NCCL preload, nccl_preload_check $mode n=4" PASS $((SECONDS - t0)) "$(grep -m1 'through stragglar' "$log" | cut -c1-80)"
    else
      row "NCCL preload, nccl_preload_check $mode n=4" FAIL $((SECONDS - t0)) "rc=$rc (see ${log#$OUT/})" "$log"
    fi
  done
  log="$LOGS/torch_allreduce_preload.log"
  t0=$SECONDS
  if "$PYTHON" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    step "$(limit 120)" "${MPIRUN[@]}" -x LD_PRELOAD="$preload_lib" -np 4 \
      sh -c "$(per_rank "$PYTHON" "$ROOT/tests/nccl_preload/torch_allreduce.py")" >"$log" 2>&1
    rc=$?
    verdict=$(grep -m1 '^torch_allreduce' "$log")
    if [ $rc -eq 0 ] && echo "$verdict" | grep -q 'PASSED$'; then
      row "NCCL preload, torch ProcessGroupNCCL n=4" PASS $((SECONDS - t0)) "${verdict#torch_allreduce }"
    else
      row "NCCL preload, torch ProcessGroupNCCL n=4" FAIL $((SECONDS - t0)) "rc=$rc ${verdict} (see ${log#$OUT/})" "$log"
    fi
  else
    row "NCCL preload, torch ProcessGroupNCCL n=4" FAIL 0 "not run: $PYTHON has no torch with CUDA"
  fi
fi

# rounds: the executor's per-round host cost over NCCL for the simulator's GPU model (docs/gpu.md
# "The simulator's GPU model"). Not yet run on a GPU: estimated 60–120 s on the H100 (14 points per
# size, each a few calls of up to 15 rounds at ~10 ms per message over these sockets; 256 MiB
# ~2 s per call; 7 communicators), so 180 s (1.5 x the high end). The benchmark stops
# starting points 25 s before its limit and writes what it has, sizes smallest first.
if want rounds; then
  log="$LOGS/bench_nccl_rounds.log"
  t0=$SECONDS
  lim=$(limit 180)
  deadline=$((lim - 25))
  if [ "$deadline" -lt 10 ]; then
    row "per-round cost of the NCCL executor (rounds)" FAIL 0 "not run: $lim s of budget left (BUDGET_S=$BUDGET_S); rerun STEPS=rounds"
  else
    step "$lim" "${MPIRUN[@]}" -np 8 sh -c "$(per_rank "$BIN/bench_nccl_rounds" --nranks "$ROUNDS_NRANKS" \
      --sizes "$ROUNDS_SIZES" --algo "$ROUNDS_ALGOS" -n 5 --min-iters 1 --point-seconds 0.3 --deadline "$deadline" \
      --json "$LOGS/round_costs.json")" >"$log" 2>&1
    rc=$?
    verdict="rounds: no JSON written"
    [ -s "$LOGS/round_costs.json" ] && cp "$LOGS/round_costs.json" "$OUT/round_costs.json" &&
    verdict=$(python3 - "$LOGS/round_costs.json" "$ROUNDS_NRANKS" "$ROUNDS_SIZES" "$ROUNDS_ALGOS" 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
ranks = set()
for item in sys.argv[2].split(","):
    lo, _, hi = item.partition("-")
    ranks.update(range(int(lo), int(hi or lo) + 1))
want = len(ranks) * len([s for s in sys.argv[3].split(",") if s]) * len([a for a in sys.argv[4].split(",") if a])
rows = d["rows"]
wrong = [f"{r['algorithm']} n={r['nranks']} {r['bytes']}" for r in rows if r.get("wrong")]
bad = [f"{r['algorithm']} n={r['nranks']} {r['bytes']}" for r in rows if not r["host_us_per_round"] > 0]
def size(b):
    return f"{b >> 20}M" if b >= 1 << 20 else f"{b >> 10}K"
sizes = sorted({r["bytes"] for r in rows})
for algo in sorted({r["algorithm"] for r in rows}):
    print(f"host enqueue per round (us), {algo}, {d['transport']}:")
    print("      " + "".join(f"{size(b):>8}" for b in sizes))
    for n in sorted({r["nranks"] for r in rows}):
        cells = {r["bytes"]: r["host_us_per_round"] for r in rows if r["algorithm"] == algo and r["nranks"] == n}
        print(f"  n={n:<2}" + "".join(f"{cells[b]:>8.1f}" if b in cells else f"{'-':>8}" for b in sizes))
print(f"rounds: {len(rows)} of {want} points measured, {len(d.get('skipped', []))} skipped at the deadline, "
      f"{len(wrong)} with wrong results{': ' + ', '.join(wrong[:4]) if wrong else ''}"
      + (f", {len(bad)} without a time" if bad else ""))
sys.exit(1 if wrong or bad or len(rows) != want or not d.get("complete") else 0)
EOF
)
    vrc=$?
    echo "$verdict" | sed '$d' | tee -a "$SUMMARY"
    last=$(echo "$verdict" | tail -1)
    if [ $rc -eq 0 ] && [ $vrc -eq 0 ]; then
      row "per-round cost of the NCCL executor (rounds)" PASS $((SECONDS - t0)) "${last#rounds: }; round_costs.json"
    else
      row "per-round cost of the NCCL executor (rounds)" FAIL $((SECONDS - t0)) "rc=$rc, ${last:-no JSON}; rerun STEPS=rounds (see ${log#$OUT/})" "$log"
    fi
  fi
fi

# The table of steps, last.
echo | tee -a "$SUMMARY"
{
  printf '%-52s %-6s %6s  %s\n' "step" "result" "s" "detail"
  for r in ${ROWS[@]+"${ROWS[@]}"}; do
    IFS='|' read -r name result secs detail <<<"$r"
    printf '%-52s %-6s %6s  %s\n' "$name" "$result" "$secs" "$detail"
  done
  echo "gpu-check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) in $((SECONDS - START)) s (budget $BUDGET_S s)$([ "$STEPS" = "$ALL_STEPS" ] || echo ", steps: $STEPS only"), $(head -1 "$LOGS/gpus.txt")"
} | tee -a "$SUMMARY"
exit $status
