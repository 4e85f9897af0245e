#!/usr/bin/env bash
# End-to-end checks of the `stragglar` CLI: exit codes and messages a user sees.
# Usage: cli_test.sh path/to/stragglar
set -u
cli="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0

# expect CODE NEEDLE -- command...: the command exits with CODE and prints NEEDLE (stdout or stderr)
expect() {
  local code="$1" needle="$2"
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [ "$rc" -eq "$code" ] && grep -qF -- "$needle" <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: $* -> exit $rc (want $code), output:"
    echo "$out" | head -5
    echo "  (wanted to see: $needle)"
  fi
}

for algo in stragglar ring rhd allpairs broadcast direct; do
  for n in 2 5 8 12; do
    "$cli" synth --algo "$algo" --nranks "$n" --straggler 1 -o "$tmp/s.json" || { echo "FAIL: synth $algo $n"; fail=$((fail + 1)); }
    expect 0 "OK: " -- "$cli" verify "$tmp/s.json"
  done
done
"$cli" synth -a stragglar -n 8 | "$cli" verify - >/dev/null && pass=$((pass + 1)) || { echo "FAIL: verify from stdin"; fail=$((fail + 1)); }
"$cli" synth -a stragglar -n 8 -o "$tmp/s8.json"
expect 0 "allreduce 9 rounds" -- "$cli" verify "$tmp/s8.json"

# streaming: stdout and -o give the same bytes; pretty JSON and another key order verify too
"$cli" synth -a stragglar -n 12 -s 3 -o "$tmp/s12.json"
"$cli" synth -a stragglar -n 12 -s 3 | cmp -s - "$tmp/s12.json" && pass=$((pass + 1)) || { echo "FAIL: synth stdout != -o"; fail=$((fail + 1)); }
"$cli" synth -a broadcast -n 7 --pretty | "$cli" verify - | grep -qF "OK: broadcast n=7" && pass=$((pass + 1)) || { echo "FAIL: verify pretty from stdin"; fail=$((fail + 1)); }
python3 - "$tmp/s12.json" "$tmp/reordered.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
json.dump(dict(reversed(list(s.items()))), open(sys.argv[2], "w"))  # "phases" first
PY
expect 0 "OK: stragglar n=12 straggler=3" -- "$cli" verify "$tmp/reordered.json"

# a planted fault: drop the last transfer of the last round
python3 - "$tmp/s8.json" "$tmp/bad.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s["phases"][-1]["rounds"][-1].pop()
json.dump(s, open(sys.argv[2], "w"))
PY
expect 1 "INVALID: incomplete result" -- "$cli" verify "$tmp/bad.json"
echo '{"format":"stragglar-schedule/1"' >"$tmp/broken.json"
# not a schedule at all is invalid (1), like a violation; a file that cannot be read is a usage error (2)
expect 1 "INVALID: schedule JSON: not valid JSON" -- "$cli" verify "$tmp/broken.json"
expect 2 "cannot open schedule file" -- "$cli" verify "$tmp/missing.json"

# bad input names the value and what was expected
expect 2 "nranks = 1, expected 2 <= nranks <= 4096" -- "$cli" synth -a ring -n 1
expect 2 "nranks = 5000" -- "$cli" synth -a ring -n 5000
expect 2 "straggler = 9, expected a rank in [0, 8)" -- "$cli" synth -a stragglar -n 8 -s 9
expect 2 "unknown algorithm 'tree'" -- "$cli" synth -a tree -n 8
expect 2 "pipeline 'x': expected an integer K in [1, 1024] or auto" -- "$cli" synth -a stragglar -n 8 --pipeline x
expect 2 "pipeline '2000': expected an integer K in [1, 1024] or auto" -- "$cli" synth -a stragglar -n 8 --pipeline 2000
expect 0 "ring singles out no straggler; --straggler 3 is ignored" -- "$cli" synth -a ring -n 8 -s 3
expect 2 "duration '5'" -- "$cli" simulate -n 8 -b 1G --alpha 5
expect 2 "size '1Q'" -- "$cli" simulate -n 8 -b 1Q
expect 2 "bandwidth 'fast'" -- "$cli" simulate -n 8 -b 1G --bandwidth fast

# simulate: the paper's anchors and the JSON fields
expect 0 "1.94" -- "$cli" simulate -n 256 -b 1G --algo stragglar
expect 0 "1.363x" -- "$cli" simulate -n 8 -b 1G --algo ring,stragglar
"$cli" simulate -n 8 -b 64M --delay 1ms --format json >"$tmp/sim.json"
python3 - "$tmp/sim.json" <<'PY' && pass=$((pass + 1)) || { echo "FAIL: simulate json fields"; fail=$((fail + 1)); }
import json, sys
rows = json.load(open(sys.argv[1]))
need = {"algorithm", "nranks", "bytes", "rounds", "time_us", "exposed_us", "speedup_vs_ring"}
assert len(rows) == 7 and all(need <= set(r) for r in rows), rows
ring = [r for r in rows if r["algorithm"] == "ring"][0]
assert abs(ring["speedup_vs_ring"] - 1) < 1e-12
PY
expect 0 "algorithm,nranks,bytes" -- "$cli" simulate -n 6 -b 1M --format csv
# γ term: ring at n = 4, 1 GiB, 450 GiB/s, reductions at 225 GiB/s: 3351.33 us + 3/4·s·γ (3333.33 us) = 6684.67 us
expect 0 "reduce-bandwidth=225GiB/s" -- "$cli" simulate -n 4 -b 1G --algo ring --reduce-bandwidth 225GiB/s
expect 0 "6684.67" -- "$cli" simulate -n 4 -b 1G --algo ring --reduce-bandwidth 225GiB/s --format csv
expect 2 "bandwidth 'slow'" -- "$cli" simulate -n 8 -b 1G --reduce-bandwidth slow

# Several late ranks and two link classes
expect 0 "" -- "$cli" synth -a stragglar-k -n 10 --stragglers 3,7,0 -o "$tmp/k.json"
expect 0 "OK: stragglar-k n=10 stragglers=0,3,7" -- "$cli" verify "$tmp/k.json"
expect 0 "OK: hierarchical n=8 stragglers=4,5,6,7" -- sh -c "'$cli' synth -a hierarchical -n 8 --stragglers 4 | '$cli' verify -"
expect 0 "1.531x" -- "$cli" simulate -n 16 -b 1G --stragglers 2 -k auto -a ring,stragglar-k
expect 2 "'x' is not an integer, expected K" -- "$cli" simulate -n 8 -b 1G --stragglers x
expect 2 "expected K in [1, 7]" -- "$cli" simulate -n 8 -b 1G --stragglers 9
expect 2 "stragglers: rank 9, expected ranks in [0, 8)" -- "$cli" synth -a stragglar-k -n 8 --stragglers 1,9
expect 2 "expected at most n/2 = 4" -- "$cli" synth -a stragglar-k -n 8 --stragglers 5
expect 2 "expected stragglar-k for several" -- "$cli" synth -a stragglar -n 8 --stragglers 6,7
expect 2 "--hosts 3: expected a divisor of n = 8" -- "$cli" simulate -n 8 -b 1G --hosts 3 --inter-bandwidth 10GB/s
expect 2 "--inter-bandwidth needs --hosts H" -- "$cli" simulate -n 8 -b 1G --inter-bandwidth 10GB/s
expect 0 "hierarchical" -- "$cli" simulate -n 64 -b 1G --stragglers 8 --hosts 8 --inter-bandwidth 100GiB/s -a stragglar-k,hierarchical

# --help-env: every STRAGGLAR_* variable of the library's table, exit 0; docs/configuration.md's
# table is exactly --help-env-markdown (regenerate it with that flag when the table changes).
expect 0 "STRAGGLAR_TIMEOUT_S" -- "$cli" --help-env
expect 0 "STRAGGLAR_NCCL_MIN_BYTES" -- "$cli" --help-env
docs="$(dirname "$0")/../../docs/configuration.md"
sed -n '/^<!-- BEGIN stragglar --help-env-markdown/,/^<!-- END stragglar --help-env-markdown/p' "$docs" | sed '1d;$d' >"$tmp/docs_table.md"
"$cli" --help-env-markdown >"$tmp/cli_table.md"
if [ -s "$tmp/cli_table.md" ] && cmp -s "$tmp/docs_table.md" "$tmp/cli_table.md"; then
  pass=$((pass + 1))
else
  fail=$((fail + 1))
  echo "FAIL: docs/configuration.md's table differs from 'stragglar --help-env-markdown':"
  diff "$tmp/docs_table.md" "$tmp/cli_table.md" | head -10
fi
for v in $(grep -o '^| `STRAGGLAR_[A-Z_]*`' "$tmp/cli_table.md" | tr -d '|` '); do
  grep -qF "$v" <("$cli" --help-env) && pass=$((pass + 1)) || { echo "FAIL: --help-env lacks $v"; fail=$((fail + 1)); }
done

# Arrival tickets priced by the simulator (docs/arrival-tickets.md): a row of their own; they need a delay.
expect 0 "tickets" -- "$cli" simulate -n 8 -b 64M --algo rhd,stragglar --delay 1ms --arrival-tickets 5us
expect 2 "--arrival-tickets needs --delay" -- "$cli" simulate -n 8 -b 64M --arrival-tickets 5us

# The GPU model's per-round host overhead (docs/gpu.md "The simulator's GPU model"): ring at
# n = 2 on 2000 bytes, α = 1 µs, 1 GB/s, h = 5 µs: rounds of 2 µs enqueued at 5 and 10 µs end at 12.
expect 0 "ring,2,2000,0,2,0,12,12,0.166667,1,5" -- "$cli" simulate -n 2 -b 2000 -a ring --alpha 1us --bandwidth 1GB/s --round-overhead 5us --format csv
expect 0 "host enqueue per round (h): 12 us per round" -- "$cli" simulate -n 8 -b 1M -a ring,stragglar --round-overhead 12us
"$cli" simulate -n 8 -b 1M -a ring --format json | grep -q round_overhead_us && { echo "FAIL: round_overhead_us without an overhead"; fail=$((fail + 1)); } || pass=$((pass + 1))
# A measured table (bench_nccl_rounds --json): 10 µs per round at n = 2, 1 KiB: two free rounds end at 20 µs;
# at 2 KiB, halfway in log2(size) between 10 and 20: 15 µs.
cat >"$tmp/rounds.json" <<'JSON'
{"format": "stragglar-round-costs/1", "tool": "bench_nccl_rounds", "device": "test", "transport": "test",
 "rows": [{"algorithm": "ring", "nranks": 2, "bytes": 1024, "host_us_per_round": 10},
          {"algorithm": "ring", "nranks": 2, "bytes": 4096, "host_us_per_round": 20}]}
JSON
expect 0 "ring,2,1024,0,2,0,20,20" -- "$cli" simulate -n 2 -b 1K -a ring --alpha 0ns --bandwidth 1000TB/s --round-costs "$tmp/rounds.json" --format csv
expect 0 "measured per round (bench_nccl_rounds: test, test, 2 points)" -- "$cli" simulate -n 2 -b 2K -a ring --round-costs "$tmp/rounds.json"
expect 0 "ring,2,2048,0,2,0,30,30," -- "$cli" simulate -n 2 -b 2K -a ring --alpha 0ns --bandwidth 1000TB/s --round-costs "$tmp/rounds.json" --format csv
expect 0 ",1,15" -- "$cli" simulate -n 2 -b 2K -a ring --alpha 0ns --bandwidth 1000TB/s --round-costs "$tmp/rounds.json" --format csv
expect 0 '"round_overhead_us": 1' -- "$cli" simulate -n 2 -b 2K -a ring --round-costs "$tmp/rounds.json" --format json
expect 0 "ring at n = 16, 2 KiB is outside the measured round costs" -- "$cli" simulate -n 16 -b 2K -a ring --round-costs "$tmp/rounds.json"
expect 2 "round costs '$tmp/none.json': cannot open the file" -- "$cli" simulate -n 8 -b 1M --round-costs "$tmp/none.json"
echo '{"format": "other"}' >"$tmp/bad.json"
expect 2 "format 'other', expected 'stragglar-round-costs/1'" -- "$cli" simulate -n 8 -b 1M --round-costs "$tmp/bad.json"
expect 2 "duration '-3us'" -- "$cli" simulate -n 8 -b 1M --round-overhead -3us
expect 108 "--round-overhead excludes --round-costs" -- "$cli" simulate -n 8 -b 1M --round-overhead 1us --round-costs "$tmp/rounds.json"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
