#!/usr/bin/env bash
# Builds the release configuration (clang-16, Release) and runs tern-bench.
# Without arguments it runs the quick profile and prints the comparison table; arguments go to tern-bench as they
# are (see `bash scripts/bench.sh --help` and `--list`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup-deps.sh

cmake --preset release
cmake --build --preset release -j2

bench=build/release/bench/tern-bench
if [[ ! -x "$bench" ]]; then
  echo "bench.sh: $bench was not built" >&2
  exit 1
fi

args=("$@")
if ((${#args[@]} == 0)); then
  args=(--profile quick)
fi
exec "$bench" "${args[@]}"
