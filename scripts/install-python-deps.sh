#!/usr/bin/env bash
# Python packages the figures (python/stragglar/figures.py, draw.py) and their tests need, from
# PyPI: matplotlib (brings numpy) and pytest. Idempotent: installs only what does not import yet,
# so a second run costs one python3 start. Called by scripts/test.sh, scripts/run.sh and
# scripts/figures.sh. With --torch (scripts/test.sh) also torch, the PyPI release: the PyTorch
# backend (src/torch, tests/torch) is built and tested against it; and expecttest, which torch's
# own test modules import (tests/torch/distributed_suite.py runs torch's distributed test suite).
set -euo pipefail
missing=()
python3 -c 'import matplotlib' 2>/dev/null || missing+=('matplotlib>=3.6')
python3 -c 'import pytest' 2>/dev/null || missing+=('pytest>=7')
if [ "${1:-}" = "--torch" ]; then
  python3 -c 'import torch' 2>/dev/null || missing+=('torch')
  python3 -c 'import expecttest' 2>/dev/null || missing+=('expecttest')
fi
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-python-deps: installing ${missing[*]}"
python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore "${missing[@]}"
