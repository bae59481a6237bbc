#!/usr/bin/env bash
# Builds tern and runs its tests in each configuration:
#   release  clang-16, Release (the whole tree, tern-bench included)
#   asan     clang-16, -O1, AddressSanitizer + UndefinedBehaviorSanitizer
#   gcc      g++-12, -O2
#   tsan     clang-16, -O1, ThreadSanitizer (the runtime's threads, cross-thread wake-ups, sync primitives)
# TERN_TEST_PRESETS="release gcc" picks a subset (any preset in CMakePresets.json). Each preset's test cases run
# two or three at a time (the test presets' "jobs"; TERN_TEST_JOBS=N overrides it), those that need the machine to
# themselves alone (tests/CMakeLists.txt says how).
# Then the fuzz targets of tests/fuzz/ (the parsers of network bytes) run briefly, through scripts/fuzz.sh: each
# replays its committed corpus and fuzzes for TERN_TEST_FUZZ_SECONDS (30 by default; 0 leaves the step out), two at
# a time. A crash, or a violated invariant, fails the run. Last, the reliability suite's quick run
# (scripts/reliability.sh --quick; TERN_TEST_RELIABILITY=0 leaves it out).
# Each step prints its time as it ends, and a table of all of them comes at the end (also after a failure): wall
# time, and the CPU time (user + system) of the step's processes, which says more than the wall time when other
# work shares the machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---- steps and their times -------------------------------------------------------------------------------------------
steps=()  # "name|wall s|CPU s|result"
times_file=$(mktemp)
run_start=$SECONDS

# Sets cpu_seconds to the user + system time of this shell's finished children (bash's `times`, which counts the
# processes they waited for in turn: ninja's compilers, ctest's tests). Not in a subshell: its own children are none.
cpu_now() {
  times >"$times_file"
  cpu_seconds=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
                               printf "%.0f", t }' "$times_file")
}

# step NAME COMMAND...: runs one command (not a shell function: errexit would not apply inside it) and records it.
step() {
  local name=$1 start=$SECONDS status=0 cpu0
  shift
  cpu_now
  cpu0=$cpu_seconds
  "$@" || status=$?
  cpu_now
  local wall=$((SECONDS - start)) cpu=$((cpu_seconds - cpu0)) result=ok
  ((status == 0)) || result="FAILED (exit status $status)"
  steps+=("$name|$wall|$cpu|$result")
  echo "== step '$name': $wall s, CPU $cpu s: $result"
  if ((status != 0)); then exit "$status"; fi
}

print_table() {
  local row name wall cpu result total_cpu=0
  echo
  echo "test.sh: the steps (wall and CPU seconds; CPU: user + system of the step's processes)"
  printf '  %-34s %7s %7s  %s\n' step wall_s cpu_s result
  for row in "${steps[@]}"; do
    IFS='|' read -r name wall cpu result <<<"$row"
    printf '  %-34s %7s %7s  %s\n' "$name" "$wall" "$cpu" "$result"
    total_cpu=$((total_cpu + cpu))
  done
  printf '  %-34s %7s %7s\n' total "$((SECONDS - run_start))" "$total_cpu"
  rm -f "$times_file"
}
trap print_table EXIT

banner() {
  echo
  echo "================================================================================"
  echo "== $1"
  echo "================================================================================"
}

# ---- packages, presets -----------------------------------------------------------------------------------------------
step setup-deps bash scripts/setup-deps.sh

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:print_stacktrace=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

read -r -a presets <<<"${TERN_TEST_PRESETS:-release asan gcc tsan}"
if ((${#presets[@]} == 0)); then
  echo "test.sh: TERN_TEST_PRESETS names no preset" >&2
  exit 2
fi
jobs=()
if [[ -n ${TERN_TEST_JOBS:-} ]]; then jobs=(-j "$TERN_TEST_JOBS"); fi

for preset in "${presets[@]}"; do
  banner "tern tests: preset '${preset}'"
  step "configure $preset" cmake --preset "$preset"
  step "build $preset" cmake --build --preset "$preset" -j2
  count=$(ctest --preset "$preset" -N | sed -n 's/^Total Tests: //p')
  echo "== preset '${preset}': ${count} tests"
  step "test $preset ($count tests)" ctest --preset "$preset" "${jobs[@]}"
done

fuzz_seconds=${TERN_TEST_FUZZ_SECONDS:-30}
if [[ $fuzz_seconds != 0 ]]; then
  banner "tern fuzz targets: ${fuzz_seconds} s each"
  step "fuzz (${fuzz_seconds} s each, build included)" bash scripts/fuzz.sh --seconds "$fuzz_seconds" --jobs 2
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
  banner "tern reliability suite: ${reliability_args[*]}"
  step "reliability ${reliability_args[*]}" bash scripts/reliability.sh "${reliability_args[@]}"
fi

echo
echo "test.sh: all presets passed: ${presets[*]}"
if [[ $fuzz_seconds != 0 ]]; then echo "test.sh: no fuzz target crashed in ${fuzz_seconds} s"; fi
if [[ $reliability != 0 ]]; then echo "test.sh: every reliability check passed or was skipped with its reason"; fi
