#!/usr/bin/env bash
# scripts/gpu-check.sh's `rounds` step without a GPU: stand-in programs in a folder of their own,
# bench_nccl_rounds a stub that writes a stragglar-round-costs/1 table (whole, partial, wrong, or
# none). The step must pass only on the whole, exact table, and bring it back as round_costs.json.
# Usage: gpu_check_rounds_dry.sh REPO_ROOT WORK_DIR
set -u
root=$1
work=$2
rm -rf "$work"
mkdir -p "$work/bin"
for b in test_cuda_device test_nccl_allreduce bench_reduce_kernels stragglar-bench-gpu nccl_preload_check \
         preload_keeps_program_nccl libstragglar_nccl_preload.so; do
  printf '#!/bin/sh\nexit 0\n' >"$work/bin/$b"
  chmod +x "$work/bin/$b"
done
cat >"$work/bin/bench_nccl_rounds" <<'EOF'
#!/usr/bin/env bash
# Rank 0 writes the table: 7 rank counts x 10 sizes x 2 algorithms, FAKE_SKIP of them skipped,
# FAKE_WRONG of them with wrong elements; FAKE_NONE=1 writes nothing.
json=""; prev=""
for a in "$@"; do [ "$prev" = --json ] && json=$a; prev=$a; done
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && [ -n "$json" ] && [ "${FAKE_NONE:-0}" != 1 ] && python3 - "$json" <<'PY'
import json, os, sys
rows, skipped, k = [], [], 0
skip, wrong = int(os.environ.get("FAKE_SKIP", 0)), int(os.environ.get("FAKE_WRONG", 0))
for b in [1024 * 4 ** i for i in range(10)]:
    for n in range(2, 9):
        for a in ("stragglar", "ring"):
            k += 1
            key = {"algorithm": a, "nranks": n, "bytes": b}
            if k > 140 - skip:
                skipped.append(key)
                continue
            rows.append(dict(key, rounds=2 * n, calls=3, host_us_per_round=8.0 + n, wrong=1 if k <= wrong else 0))
json.dump({"format": "stragglar-round-costs/1", "transport": "stub", "complete": not skipped,
           "rows": rows, "skipped": skipped}, open(sys.argv[1], "w"))
PY
exit 0
EOF
chmod +x "$work/bin/bench_nccl_rounds"

fail=0
# check NAME WANT_RC NEEDLE [VAR=VALUE...]: the step's verdict
check() {
  local name=$1 want=$2 needle=$3
  shift 3
  local out rc
  out=$(env "$@" OUT="$work/out-$name" STEPS=rounds bash "$root/scripts/gpu-check.sh" "$work" 2>&1)
  rc=$?
  if [ "$rc" -eq "$want" ] && grep -qF -- "$needle" <<<"$out"; then
    echo "ok: $name (exit $rc)"
  else
    echo "FAIL: $name: exit $rc (want $want), wanted '$needle' in:"
    echo "$out" | tail -5
    fail=1
  fi
}
check whole 0 "PASS" FAKE_SKIP=0
[ -s "$work/out-whole/round_costs.json" ] || { echo "FAIL: round_costs.json not in \$OUT"; fail=1; }
grep -q "n=8 " "$work/out-whole/summary.txt" || { echo "FAIL: no table in summary.txt"; fail=1; }
check partial 1 "130 of 140 points measured, 10 skipped at the deadline" FAKE_SKIP=10
check wrong 1 "2 with wrong results" FAKE_WRONG=2
check none 1 "no JSON written" FAKE_NONE=1
check nobudget 1 "not run: 25 s of budget left" BUDGET_S=30
exit $fail
