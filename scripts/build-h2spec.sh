#!/usr/bin/env bash
# Builds h2spec, the HTTP/2 conformance suite (Go), at the version and with the dependencies pinned in
# tests/http2/h2spec/go.mod and go.sum, into build/tools/h2spec, where the tests http2.h2spec.* find it.
# scripts/setup-deps.sh calls it; the tests call it too when the binary is missing. Without Go it says so and
# exits 0: the h2spec tests are then skipped with that message.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=build/tools/h2spec
if ! command -v go >/dev/null 2>&1; then
  echo "build-h2spec: Go is not installed: h2spec is not built, and the HTTP/2 conformance tests are skipped"
  exit 0
fi
mkdir -p build/tools
# One build at a time (ctest runs the h2spec tests in parallel, each may ask for it).
exec 9>build/tools/.h2spec.lock
flock 9
if [[ -x $out && $out -nt tests/http2/h2spec/go.sum && $out -nt tests/http2/h2spec/go.mod ]]; then
  exit 0
fi
(cd tests/http2/h2spec && GOFLAGS=-mod=readonly go build -o "../../../$out.tmp" github.com/summerwind/h2spec/cmd/h2spec)
mv "$out.tmp" "$out"
echo "build-h2spec: built $out"
