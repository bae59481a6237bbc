#!/usr/bin/env bash
# Installs the Debian 12 packages that building, testing and benchmarking tern need, then builds the tools that
# are not packages (h2spec: scripts/build-h2spec.sh).
# Idempotent: when everything is installed it only queries dpkg and returns.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config ccache
  clang-16 libc++-16-dev libc++abi-16-dev libclang-rt-16-dev lld-16
  llvm-16
  clang-19
  g++-12
  liburing-dev
  libc-ares-dev
  libssl-dev openssl
  zlib1g-dev
  libaio-dev
  libasio-dev
  libboost-dev libhttp-parser-dev libsimdjson-dev wrk
  valgrind
  libpq-dev postgresql libpqxx-dev
  curl
  iptables iproute2 procps ethtool util-linux
  libgtest-dev libgmock-dev
  python3 python3-matplotlib python3-websockets
  redis-server redis-tools libhiredis-dev libevent-dev
  libnghttp2-dev nghttp2-client nghttp2-server python3-h2
)
# h2spec is built with Go (scripts/build-h2spec.sh; its go.mod asks for Go 1.18): Debian's golang-go (1.19) when no
# go command is there already.
if ! command -v go >/dev/null 2>&1; then
  packages+=(golang-go)
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

# Tools that are not Debian packages, built from pinned sources once the packages are there: h2spec (Go).
build_tools() { bash "$(dirname "${BASH_SOURCE[0]}")/build-h2spec.sh"; }

if ((${#missing[@]} == 0)); then
  echo "setup-deps: all ${#packages[@]} packages are installed"
  build_tools
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup-deps: missing packages and not root, no sudo: install them as root: ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
build_tools
