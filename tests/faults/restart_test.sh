#!/usr/bin/env bash
# Restart after a lost rank: torchrun --max-restarts 1 on the "stragglar" backend, one
# rank SIGKILLed mid-training on the first attempt; the restarted job resumes from its checkpoint
# and must finish with the exact result on every rank. Usage: restart_test.sh EXAMPLE NPROC
set -euo pipefail
example=$1
nproc=${2:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$(OMP_NUM_THREADS=1 timeout 240 python3 -m torch.distributed.run --standalone --nproc-per-node "$nproc" \
        --max-restarts 1 --monitor-interval 0.5 "$example" --steps 12 --kill-rank 1 --kill-step 5 \
        --checkpoint "$dir/ckpt.pt" 2>&1) || { echo "$out" | tail -40; echo "FAIL: torchrun exited non-zero"; exit 1; }
line=$(echo "$out" | grep "^restart_after_lost_rank:" || true)
echo "$line"
case "$line" in
  *"attempt 1, resumed at step 5"*"exact on every rank"*) echo "PASS" ;;
  *) echo "$out" | tail -40; echo "FAIL: expected a restart (attempt 1) resuming at step 5 with an exact result"; exit 1 ;;
esac
