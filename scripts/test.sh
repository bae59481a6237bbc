#!/usr/bin/env bash
# Builds tern and runs its tests in each configuration:
#   release  clang-16, Release (the whole tree, tern-bench included)
#   asan     clang-16, -O0, AddressSanitizer + UndefinedBehaviorSanitizer (at -O1 the optimizer spends twice as
#            long on the instrumented code: the build took 2.1 times the CPU, the whole step 1.5 times)
#   tsan     clang-16, -O1, ThreadSanitizer (the runtime's threads, cross-thread wake-ups, sync primitives)
#   gcc      g++-12, -O2 (last: its tests need the least CPU, and run beside the reliability suite)
# The asan and tsan presets link with lld (the release and gcc presets keep the system's linker).
# TERN_TEST_PRESETS="release gcc" picks a subset (any preset in CMakePresets.json). Each preset's test cases run
# two or three at a time (the test presets' "jobs"; TERN_TEST_JOBS=N overrides it), those that need the machine to
# themselves alone (tests/CMakeLists.txt says how), while the next preset builds (below).
# After the last build, three things run at once: the last preset's tests; the reliability suite's quick run
# (scripts/reliability.sh --quick, with its sanitizer pass when asan and tsan were built; TERN_TEST_RELIABILITY=0
# leaves it out); and at nice 19 the fuzz targets of tests/fuzz/ (the parsers of network bytes): built, then run
# briefly through scripts/fuzz.sh: each replays its committed corpus and fuzzes for TERN_TEST_FUZZ_SECONDS (30 by
# default; 0 leaves them out), two at a time. A crash, or a violated invariant, fails the run. What no test of a
# preset runs builds beside the fuzzers, also at nice 19: the release preset's benchmark (tern-bench and its
# workers), and the gcc preset's build of the reliability suite's programs.
# Compiled objects are kept between runs by ccache (installed by setup-deps.sh; TERN_TEST_CCACHE=0 builds without
# it): a run after a change compiles what the change touched.
# Each step prints its time as it ends, and a table of all of them comes at the end (also after a failure): wall
# time, and the CPU time (user + system) of the step's processes, which says more than the wall time when other
# work shares the machine.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---- steps and their times -------------------------------------------------------------------------------------------
# A step is one command. It runs in a child shell that measures its wall time and its CPU time (bash's `times`: the
# user + system time of every process it waited for, compilers and tests alike), so that a step's figures are its own
# even while another step runs beside it. Steps may run in the background (a preset's tests, while the next preset
# builds; at the end, two beside the reliability suite): the output of each goes to a log of its own, shown when the
# step is joined.
steps=()  # "name|wall s|CPU s|result"
step_dir=$(mktemp -d)
step_count=0
bg_pids=() bg_names=() bg_files=()  # the background steps, in the order they started
run_start=$SECONDS

# timed FILE COMMAND... (a script for bash -c): runs COMMAND; writes "status wall_s cpu_s" to FILE; exits with
# COMMAND's status.
timed='file=$0; start=$SECONDS; status=0; "$@" || status=$?; times >"$file.times"
  cpu=$(awk '"'"'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] }
                           printf "%.0f", t }'"'"' "$file.times")
  echo "$status $((SECONDS - start)) $cpu" >"$file"; exit "$status"'

# record NAME FILE: adds a finished step to the table; a failed step ends the run.
record() {
  local name=$1 status wall cpu result=ok
  read -r status wall cpu <"$2"
  ((status == 0)) || result="FAILED (exit status $status)"
  steps+=("$name|$wall|$cpu|$result")
  echo "== step '$name': $wall s, CPU $cpu s: $result"
  if ((status != 0)); then exit "$status"; fi
}

# step NAME COMMAND...: runs one command (not a shell function: errexit would not apply inside it) and records it.
step() {
  local name=$1 file="$step_dir/$((++step_count))"
  shift
  bash -c "$timed" "$file" "$@" || true
  record "$name" "$file"
}

# step_bg NAME COMMAND...: starts a step in the background (after joining those before it, if any).
step_bg() {
  step_join
  step_beside "$@"
}

# step_beside NAME COMMAND...: starts a step in the background beside those already there.
step_beside() {
  local name=$1 file="$step_dir/$((++step_count))"
  shift
  echo "== step '$name': started; its output follows when it ends"
  # A session of its own, so that a failure elsewhere can stop the whole step (ctest and its tests) at once.
  setsid bash -c "$timed" "$file" "$@" >"$file.log" 2>&1 &
  bg_pids+=("$!") bg_names+=("$name") bg_files+=("$file")
}

# step_join: waits for the background steps, in the order they started, shows the output of each and records it.
step_join() {
  while ((${#bg_pids[@]})); do
    wait "${bg_pids[0]}" || true
    local name=${bg_names[0]} file=${bg_files[0]}
    bg_pids=("${bg_pids[@]:1}") bg_names=("${bg_names[@]:1}") bg_files=("${bg_files[@]:1}")
    cat "$file.log"
    record "$name" "$file"
  done
}

print_table() {
  local row name wall cpu result total_cpu=0
  local pid
  for pid in "${bg_pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  echo
  echo "test.sh: the steps (wall and CPU seconds; CPU: user + system of the step's processes; a preset's tests ran"
  echo "beside the next step, so their wall times overlap and the total is less than their sum)"
  printf '  %-34s %7s %7s  %s\n' step wall_s cpu_s result
  for row in "${steps[@]}"; do
    IFS='|' read -r name wall cpu result <<<"$row"
    printf '  %-34s %7s %7s  %s\n' "$name" "$wall" "$cpu" "$result"
    if [[ $name != "  "* ]]; then total_cpu=$((total_cpu + cpu)); fi  # not the parts of a step
  done
  printf '  %-34s %7s %7s\n' total "$((SECONDS - run_start))" "$total_cpu"
  if [[ -n $ccache_log && -s $ccache_log ]]; then
    echo "test.sh: ccache this run: $(CCACHE_STATSLOG=$ccache_log ccache --show-log-stats | grep -E '^ *(Hits|Misses):' |
      tr -s ' ' | sed 's/^ //' | paste -sd ';' - | sed 's/;/; /g')"
  fi
  rm -rf "$step_dir"
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

read -r -a presets <<<"${TERN_TEST_PRESETS:-release asan tsan gcc}"
if ((${#presets[@]} == 0)); then
  echo "test.sh: TERN_TEST_PRESETS names no preset" >&2
  exit 2
fi
jobs=()
if [[ -n ${TERN_TEST_JOBS:-} ]]; then jobs=(-j "$TERN_TEST_JOBS"); fi

# ---- compiler cache ----------------------------------------------------------------------------------------------------
# ccache keeps what the compilers made between runs, in its own cache (~/.cache/ccache unless CCACHE_DIR says
# otherwise): a run after a change compiles only what the change touched (a whole run compiles for about 30 CPU
# minutes). CMake takes the launcher from the environment when it first configures a build directory (every preset
# of a fresh clone, and scripts/fuzz.sh's). Paths are hashed relative to the clone, so that two clones at different
# places share objects; the precompiled headers of the tests hold their clone's absolute paths, so the objects that
# use them are shared only by clones at the same place. Depend mode: on a miss the compiler runs once and its
# dependency file (-MD, which the build asks for anyway) keys the result, instead of a separate preprocessor run
# first (a cold build of the core and tern::http under ASan: 45.4 CPU s instead of 50.3; without ccache 43.5). The
# hits and misses of this run are printed at the end.
ccache_log=""
if [[ ${TERN_TEST_CCACHE:-1} != 0 ]] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true CCACHE_SLOPPINESS=pch_defines,time_macros CCACHE_DEPEND=true
  ccache_log="$step_dir/ccache.log"
  export CCACHE_STATSLOG=$ccache_log
fi

# targets_except BUILD_NINJA NODE EXCLUDED...: the inputs of the phony target NODE (a directory's `all`), but for the
# EXCLUDED ones; an input that holds an excluded one (its directory's `all`) is replaced by its own inputs.
targets_except() {
  local file=$1 node=$2 t x inner
  shift 2
  for t in $(sed -n "s|^build $node: phony ||p" "$file"); do
    inner=0
    for x in "$@"; do
      if [[ $t == "$x" ]]; then continue 2; fi
      if [[ $t == */all && $x == "${t%all}"* ]]; then inner=1; fi
    done
    if ((inner)); then targets_except "$file" "$t" "$@"; else echo "$t"; fi
  done
}
later=()  # "PRESET TARGET": built at the end, beside the reliability suite (below)
reliability=${TERN_TEST_RELIABILITY:-1}
# The test cases that use a PostgreSQL server (tern::pg's, with their cluster's set-up and tear-down, and the example's)
pg_tests='(^|/)pg[._]|^examples\.pg_demo\.'
pg_running=$step_dir/pg-tests-running
export TERN_RELIABILITY_FILE_MAX_WAIT=$pg_running

# A preset's tests run while the next preset builds: the tests wait on sockets, timers and servers more than they
# compute (a test run keeps about one of the two CPUs busy), and the build takes what they leave. The suite is
# written for that: nothing in it is timed against the clock, and the cases that need the machine to themselves run
# alone among the tests (RUN_SERIAL). The last preset's tests run beside the fuzzing.
for preset in "${presets[@]}"; do
  banner "tern tests: preset '${preset}'"
  step "configure $preset" cmake --preset "$preset"
  build_args=(-j2)
  # What no test of the preset runs builds at the end, where the reliability suite leaves the CPUs idle: the
  # benchmark (bench/all: Asio, Beast and the other comparators, a third of the release build), and the reliability
  # suite's programs (tests/reliability) where the suite does not run them (it runs those of release, asan and tsan).
  # Their compile is still a check of every run; the rest of the tree (the build's `all` without them) builds here.
  built_later=()
  if [[ $preset == release ]]; then built_later+=(bench/all); fi
  if [[ $preset != release && $preset != asan && $preset != tsan ]]; then built_later+=(tests/reliability/all); fi
  if ((${#built_later[@]})); then
    for t in $(targets_except "build/$preset/build.ninja" all "${built_later[@]}"); do build_args+=(--target "$t"); done
    for t in "${built_later[@]}"; do
      if grep -q "^build $t: phony" "build/$preset/build.ninja"; then later+=("$preset $t"); fi
    done
  fi
  step "build $preset" cmake --build --preset "$preset" "${build_args[@]}"
  count=$(ctest --preset "$preset" -N | sed -n 's/^Total Tests: //p')
  echo "== preset '${preset}': ${count} tests"
  if [[ $preset == "${presets[-1]}" && $reliability != 0 ]]; then
    # The last preset's tests run beside the reliability suite (below), whose fault/enfile check fills the system's
    # file table for a few seconds: only processes with CAP_SYS_ADMIN can then open a file (the tests' PostgreSQL
    # servers run as the postgres user), and nobody can make a Unix socket (the kernel caps them at twice
    # fs.file-max, root included: a test's socketpair failed with ENFILE). So the check, the suite's last, waits
    # until they are all done (TERN_RELIABILITY_FILE_MAX_WAIT: a file that exists while they run). The cases with a
    # PostgreSQL server run first, in a ctest run of their own; the rest follow.
    touch "$pg_running"
    step_bg "test $preset ($count tests)" bash -c '
      preset=$0 pg=$1 marker=$2; shift 2; status=0
      ctest --preset "$preset" -R "$pg" --no-tests=ignore "$@" || status=$?
      ctest --preset "$preset" -E "$pg" "$@" || status=$?
      rm -f "$marker"
      exit "$status"' "$preset" "$pg_tests" "$pg_running" "${jobs[@]}"
  else
    step_bg "test $preset ($count tests)" ctest --preset "$preset" "${jobs[@]}"
  fi
done

# The end, three things at once: the last preset's tests (started above); the reliability suite (below), which waits
# on timers, peers and packet loss more than it computes (189 s of CPU over its 324 s); and, at the lowest priority,
# the fuzz targets' build, then the fuzzers beside the builds left out above (tern-bench; the gcc preset's
# reliability programs), whose compile is a check that no test waits for. They take what the suite and the tests
# leave without delaying them: a fuzzer runs for a time, not a number of inputs, so it only fuzzes less. Beside a
# build at equal priority the suite's soak had failed (an echo rate sample below a quarter of the median); at nice 19
# the kernel gives the suite's processes the CPU whenever they want it. The last preset's tests (gcc's: 89 s of CPU
# over 119 s) run beside the suite at equal priority, as they ran beside the fuzz build before; they end long before
# the soak. When the suite started only after them, with the low-priority work one thing after another, the end took
# 443 s (the tests beside the fuzz build, then the suite's 324 s); now about the suite's time.
# Fuzzing: 30 s each, the eleven targets two at a time (the hour-long runs are scripts/fuzz.sh's, recorded in
# docs/reliability.md).
fuzz_seconds=${TERN_TEST_FUZZ_SECONDS:-30}
late_name=()    # the parts of the low-priority step, numbered from 1 in this order
late_script=""  # runs them: the fuzz build, then the fuzzers and the builds, two sequences side by side
# late_part COMMAND NAME: sets part to the script text that runs COMMAND as a part of its own, timed (late.N).
late_part() {
  late_name+=("$2")
  printf -v part 'bash -c "$timed" %q bash -c %q' "$step_dir/late.${#late_name[@]}" "$1"
}
fuzzers="" builds=""
if [[ $fuzz_seconds != 0 ]]; then
  late_part "bash scripts/fuzz.sh --build-only" "fuzz build"
  late_script="$part"$'\n'
  late_part "bash scripts/fuzz.sh --no-build --seconds $fuzz_seconds --jobs 2" "fuzz (${fuzz_seconds} s each)"
  fuzzers=$part
fi
for entry in "${later[@]}"; do
  read -r preset target <<<"$entry"
  name="build $preset $target"
  if [[ $target == bench/all ]]; then name="build tern-bench"; fi
  late_part "cmake --build --preset $preset -j2 --target $target" "$name"
  builds+="${builds:+ && }$part"
done
late_script+="status=0
( ${fuzzers:-:} ) & fuzzers=\$!
( ${builds:-:} ) || status=\$?
wait \$fuzzers || status=\$?
exit \$status"
if ((${#late_name[@]})); then
  export timed
  joined=$(IFS='+'; echo "${late_name[*]}")
  banner "${joined//+/, }: at nice 19, beside the reliability suite"
  step_beside "at nice 19: the ${#late_name[@]} parts below" nice -n 19 bash -ec "$late_script"
fi

# The reliability suite's quick run (scripts/reliability.sh: packet loss through network namespaces, a slicing
# proxy, thousands of connections, faults; both backends; a few minutes). It builds the release preset's targets it
# needs; TERN_TEST_RELIABILITY=0 leaves it out. --no-doc: a test run does not rewrite docs/reliability.md. When the
# asan and tsan presets were built above, the suite's sanitizer pass runs too (packet loss, many connections and
# shutdown under load with the programs of those builds): their programs are already built, so it costs the checks'
# minute or two, not two more builds.
if [[ $reliability != 0 ]]; then
  reliability_args=(--quick --no-doc)
  if [[ " ${presets[*]} " == *" asan "* && " ${presets[*]} " == *" tsan "* ]]; then reliability_args+=(--sanitizers); fi
  banner "tern reliability suite: ${reliability_args[*]}"
  step "reliability ${reliability_args[*]}" bash scripts/reliability.sh "${reliability_args[@]}"
fi
step_join
for i in "${!late_name[@]}"; do
  if [[ -f $step_dir/late.$((i + 1)) ]]; then
    read -r status wall cpu <"$step_dir/late.$((i + 1))"
    steps+=("  ${late_name[i]}|$wall|$cpu|part of the step above")
  fi
done

echo
echo "test.sh: all presets passed: ${presets[*]}"
if [[ $fuzz_seconds != 0 ]]; then echo "test.sh: no fuzz target crashed in ${fuzz_seconds} s"; fi
if [[ $reliability != 0 ]]; then echo "test.sh: every reliability check passed or was skipped with its reason"; fi
