#!/usr/bin/env bash
# Installs the Debian packages kiln builds against. Idempotent: packages that
# are already present are not downloaded again.
set -euo pipefail
PKGS=(
  build-essential cmake ninja-build pkg-config git xz-utils
  llvm-22-dev libmlir-22-dev mlir-22-tools
  libzstd-dev libedit-dev libcurl4-openssl-dev libxml2-dev libffi-dev zlib1g-dev libncurses-dev
  libfmt-dev catch2 nlohmann-json3-dev
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
