#!/usr/bin/env bash
# Installs whatever is missing of the Debian packages ringgrad needs. Idempotent: a machine that
# has everything is left alone and no package index is fetched. Uses sudo when not root.
#
#   scripts/install-deps.sh          build, test and train
#   scripts/install-deps.sh --bench  also PyTorch (the peer for benchmarks) and matplotlib (docs)
#   scripts/install-deps.sh --fuzz   also clang with libFuzzer (-DRG_FUZZ=ON) and Pillow (seed corpora)
set -euo pipefail

pkgs=(build-essential cmake pkg-config libopenblas-dev libopenmpi-dev openmpi-bin
      libcriterion-dev libstb-dev zlib1g-dev dataset-fashion-mnist iproute2 python3
      clang libclang-rt-14-dev libomp-dev)  # clang: the libFuzzer targets (scripts/fuzz.sh)
if [ "${1:-}" = "--bench" ]; then
  pkgs+=(python3-torch python3-torchvision python3-matplotlib python3-numpy)
fi
if [ "${1:-}" = "--fuzz" ]; then
  pkgs+=(clang libclang-rt-14-dev python3-pil)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
