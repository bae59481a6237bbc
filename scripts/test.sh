#!/usr/bin/env bash
# Builds tern and runs its tests in each configuration:
#   release  clang-16, Release
#   asan     clang-16, -O1, AddressSanitizer + UndefinedBehaviorSanitizer
#   gcc      g++-12, -O2
#   tsan     clang-16, -O1, ThreadSanitizer (the runtime's threads, cross-thread wake-ups, sync primitives)
# TERN_TEST_PRESETS="release gcc" picks a subset (any preset in CMakePresets.json).
# Then the fuzz targets of tests/fuzz/ (the parsers of network bytes) run briefly, through scripts/fuzz.sh: each
# replays its committed corpus and fuzzes for TERN_TEST_FUZZ_SECONDS (60 by default; 0 leaves the step out), two at
# a time. A crash, or a violated invariant, fails the run. Last, the reliability suite's quick run
# (scripts/reliability.sh --quick; TERN_TEST_RELIABILITY=0 leaves it out).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup-deps.sh

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

read -r -a presets <<<"${TERN_TEST_PRESETS:-release asan gcc tsan}"
if ((${#presets[@]} == 0)); then
  echo "test.sh: TERN_TEST_PRESETS names no preset" >&2
  exit 2
fi

for preset in "${presets[@]}"; do
  echo
  echo "================================================================================"
  echo "== tern tests: preset '${preset}'"
  echo "================================================================================"
  start=$SECONDS
  cmake --preset "$preset"
  cmake --build --preset "$preset" -j2
  ctest --preset "$preset"
  echo "== preset '${preset}' passed in $((SECONDS - start)) s"
done

fuzz_seconds=${TERN_TEST_FUZZ_SECONDS:-60}
if [[ $fuzz_seconds != 0 ]]; then
  echo
  echo "================================================================================"
  echo "== tern fuzz targets: ${fuzz_seconds} s each"
  echo "================================================================================"
  start=$SECONDS
  bash scripts/fuzz.sh --seconds "$fuzz_seconds" --jobs 2
  echo "== fuzz targets passed in $((SECONDS - start)) s"
fi

# The reliability suite's quick run (scripts/reliability.sh: packet loss through network namespaces, a slicing
# proxy, thousands of connections, faults; both backends; a few minutes). It builds the release preset's targets it
# needs; TERN_TEST_RELIABILITY=0 leaves it out. --no-doc: a test run does not rewrite docs/reliability.md. When the
# asan and tsan presets were built above, the suite's sanitizer pass runs too (packet loss, many connections and
# shutdown under load with the programs of those builds): their programs are already built, so it costs the checks'
# minute or two, not two more builds.
reliability=${TERN_TEST_RELIABILITY:-1}
if [[ $reliability != 0 ]]; then
  reliability_args=(--quick --no-doc)
  if [[ " ${presets[*]} " == *" asan "* && " ${presets[*]} " == *" tsan "* ]]; then reliability_args+=(--sanitizers); fi
  echo
  echo "================================================================================"
  echo "== tern reliability suite: ${reliability_args[*]}"
  echo "================================================================================"
  start=$SECONDS
  bash scripts/reliability.sh "${reliability_args[@]}"
  echo "== reliability suite passed in $((SECONDS - start)) s"
fi

echo
echo "test.sh: all presets passed: ${presets[*]}"
if [[ $fuzz_seconds != 0 ]]; then echo "test.sh: no fuzz target crashed in ${fuzz_seconds} s"; fi
if [[ $reliability != 0 ]]; then echo "test.sh: every reliability check passed or was skipped with its reason"; fi
