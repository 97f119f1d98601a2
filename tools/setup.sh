#!/usr/bin/env bash
# Installs the Debian 12 packages SkipSwarm needs to build, test and run.
#
# Idempotent: when everything is present it prints nothing and exits 0.
# Needs root (or passwordless sudo) only when something is missing.
# Used by both README commands and by .ci/run.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap bazel-rules-java
  g++ libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libssl-dev openssl
  libtorch-dev libgloo-dev libopenblas0-openmp
  libgtest-dev libgmock-dev libbenchmark-dev
  libgoogle-glog-dev nlohmann-json3-dev libcpp-httplib-dev libsentencepiece-dev
  fortunes
  clang libclang-rt-14-dev
  iproute2 iptables
  chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo"
  else
    echo "setup: these Debian packages are missing: ${missing[*]}" >&2
    echo "setup: run this script as root (or install them with apt-get) and try again." >&2
    exit 1
  fi
fi

echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
