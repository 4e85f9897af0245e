#!/usr/bin/env bash
# Installs what stragglar needs on Debian 12 / Ubuntu (idempotent; skips apt when all present).
# CUDA + NCCL are not installed here: the GPU runtime builds when they are found.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libcli11-dev nlohmann-json3-dev liblemon-dev libopenmpi-dev openmpi-bin
      libgtest-dev libgmock-dev libbenchmark-dev libucx-dev
      libmpich-dev mpich  # MPICH: the preload library's second MPI (issue #21); Open MPI stays the default
      iproute2)  # ip netns + tc: scripts/cluster.sh, the multi-host testbed (issue #23)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
